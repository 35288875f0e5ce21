package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// drainJobs leases everything due and acks it, until the queue is empty:
// before each Lease it calls advance, which moves the clock past every
// lease and retry delay. It counts each successful Ack in acks, by job ID.
// An Ack that fails with ErrLeaseLost counts nothing: nobody else holds a
// lease now, so an Ack that says so and removed the job anyway (as one
// retried without the journal does) loses it from the caller's accounts.
func drainJobs(ctx context.Context, db kv.Database, q *fdbqueue.JobQueue, advance func(), acks map[string]int) error {
	for i := 0; ; i++ {
		if i > 1000 {
			return errors.New("sim: the job queue did not drain")
		}
		advance()
		ls, err := q.Lease(ctx, db, 10, 0)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			st, err := q.Stats(ctx, db)
			if err != nil {
				return err
			}
			if st.Queued+st.Leased+st.ExpiredLeases == 0 {
				return nil
			}
			continue
		}
		if err != nil {
			return err
		}
		for _, l := range ls {
			switch err := q.Ack(ctx, db, l); {
			case errors.Is(err, fdbqueue.ErrLeaseLost):
			case err != nil:
				return err
			default:
				acks[string(l.JobID[:])]++
			}
		}
	}
}

// deadAfterDrain returns the job records left after drainJobs, which must
// all be dead, as a set of job IDs, and adds to *deadAttempts the number
// of them whose attempts are not their MaxAttempts.
func deadAfterDrain(final []JobRecord, deadAttempts *int) (map[string]bool, error) {
	dead := map[string]bool{}
	for _, j := range final {
		if !j.Dead {
			return nil, fmt.Errorf("sim: job %x still queued after the drain", j.Job)
		}
		dead[j.Job] = true
		if j.Attempts != j.Max {
			*deadAttempts++
		}
	}
	return dead, nil
}

// observeJobs reads every job record, queued, leased or dead, and the
// unique-key index (sorted by key) straight from the database (the layout
// in docs/design.md), and, if seen is not nil, calls it with every job's
// ID and value.
func observeJobs(ctx context.Context, db kv.Database, sub fdbqueue.Subspace, seen func(job string, value []byte)) ([]JobRecord, []KeyHold, error) {
	var out []JobRecord
	var held []KeyHold
	err := eachUnder(ctx, db, sub, "u", func(_, key, job []byte) error {
		held = append(held, KeyHold{Key: string(key), Job: string(job)})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if seen != nil {
		err := eachUnder(ctx, db, sub, "v", func(_, id, value []byte) error {
			seen(string(id), value)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	err = eachRecord(ctx, db, sub, func(_ []byte, rec JobRecord) error {
		out = append(out, rec)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Job < out[j].Job })
	return out, held, nil
}

// eachRecord reads every job record, queued or leased ("q"), then dead
// ("d"), and calls fn with its key and the record (layout in
// docs/design.md); it stops at fn's first error and returns it.
func eachRecord(ctx context.Context, db kv.Database, sub fdbqueue.Subspace, fn func(key []byte, rec JobRecord) error) error {
	for _, tag := range []string{"q", "d"} {
		err := eachUnder(ctx, db, sub, tag, func(k, id, value []byte) error {
			v, err := tuple.Unpack(value)
			if err != nil || len(v) != 9 {
				return fmt.Errorf("sim: bad job record at %x", k)
			}
			rec := JobRecord{Job: string(id), Dead: tag == "d"}
			vest, _ := v[0].(int64)
			prio, _ := v[1].(int64)
			att, _ := v[3].(int64)
			mx, _ := v[4].(int64)
			rec.Vest, rec.Prio, rec.Attempts, rec.Max = vest, int32(prio), int(att), int(mx)
			if u, ok := v[5].([]byte); ok {
				rec.Unique = string(u)
			}
			if lid, ok := v[2].([]byte); ok && len(lid) == 16 {
				rec.Tag = binary.BigEndian.Uint64(lid[:8])
			}
			return fn(k, rec)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// checkAccounts reads the job queue's records, its ID index ("x"), its
// values ("v"), its vesting-time bucket counters ("c", "p" | "e") and its
// Stats, at a quiescent point (no operation under way, every late commit
// landed), and adds to res.Leftovers each index entry or value that
// belongs to no record (a removed job's left behind), each record
// missing either or pointed at by no index entry, and each ID with two
// records; and to res.CountErrors 1 if Stats' exact counts (queued,
// leased, dead) or any bucket counter disagree with the records. The
// queue's StatsResolution must be leaseStatsResolution.
func checkAccounts(ctx context.Context, db kv.Database, q *fdbqueue.JobQueue, sub fdbqueue.Subspace, res *accounts) error {
	keys := map[string][]byte{} // record key by job ID
	var queued, leased, dead int64
	buckets := map[string]map[int64]int64{"p": {}, "e": {}} // the counts the records imply
	res0 := int64(leaseStatsResolution / time.Microsecond)
	err := eachRecord(ctx, db, sub, func(k []byte, r JobRecord) error {
		if _, ok := keys[r.Job]; ok {
			res.Leftovers++
		}
		keys[r.Job] = bytes.Clone(k)
		series := "p"
		switch {
		case r.Dead:
			dead++
			return nil
		case r.Tag != 0:
			leased++
			series = "e"
		default:
			queued++
		}
		b := r.Vest / res0
		if r.Vest < 0 && r.Vest%res0 != 0 {
			b--
		}
		buckets[series][b]++
		return nil
	})
	if err != nil {
		return err
	}
	indexed := map[string]bool{}
	err = eachUnder(ctx, db, sub, "x", func(_, id, key []byte) error {
		indexed[string(id)] = true
		if k, ok := keys[string(id)]; !ok || !bytes.Equal(k, key) {
			res.Leftovers++
		}
		return nil
	})
	if err != nil {
		return err
	}
	valued := map[string]bool{}
	err = eachUnder(ctx, db, sub, "v", func(_, id, _ []byte) error {
		valued[string(id)] = true
		if _, ok := keys[string(id)]; !ok {
			res.Leftovers++
		}
		return nil
	})
	if err != nil {
		return err
	}
	for job := range keys {
		if !indexed[job] {
			res.Leftovers++
		}
		if !valued[job] {
			res.Leftovers++
		}
	}
	bad := false
	for series, want := range buckets {
		got := map[int64]int64{}
		r, err := sub.Range("c", series)
		if err != nil {
			return err
		}
		kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
			return tr.GetRange(r, kv.RangeOptions{Mode: kv.StreamingModeWantAll}).GetSlice()
		})
		if err != nil {
			return err
		}
		for _, p := range kvs {
			t, err := sub.Unpack(p.Key)
			if err != nil {
				return err
			}
			b, ok := t[len(t)-1].(int64)
			if !ok || len(p.Value) != 8 {
				bad = true
				continue
			}
			got[b] = int64(binary.LittleEndian.Uint64(p.Value))
		}
		// A counter that reaches zero is cleared: none is left at 0.
		bad = bad || !maps.Equal(got, want)
	}
	st, err := q.Stats(ctx, db)
	if err != nil {
		return err
	}
	if bad || st.Queued != queued || st.Leased+st.ExpiredLeases != leased || st.Dead != dead {
		res.CountErrors++
	}
	return nil
}

// accounts is what checkAccounts found: LeaseResult's and PoolResult's
// Leftovers and CountErrors.
type accounts struct{ Leftovers, CountErrors int }

// checkAccountsInto runs checkAccounts and adds what it found to
// leftovers and countErrors.
func checkAccountsInto(ctx context.Context, db kv.Database, q *fdbqueue.JobQueue, sub fdbqueue.Subspace, leftovers, countErrors *int) error {
	var a accounts
	if err := checkAccounts(ctx, db, q, sub, &a); err != nil {
		return err
	}
	*leftovers += a.Leftovers
	*countErrors += a.CountErrors
	return nil
}

// eachUnder reads, in one transaction, every pair under sub's tag and
// calls fn, in key order, with its key, the key's last tuple element (nil
// if that is not a byte string) and its value; it stops at fn's first
// error and returns it.
func eachUnder(ctx context.Context, db kv.Database, sub fdbqueue.Subspace, tag string, fn func(key, last, value []byte) error) error {
	r, err := sub.Range(tag)
	if err != nil {
		return err
	}
	kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{Mode: kv.StreamingModeWantAll}).GetSlice()
	})
	if err != nil {
		return err
	}
	for _, p := range kvs {
		k, err := sub.Unpack(p.Key)
		if err != nil {
			return err
		}
		last, _ := k[len(k)-1].([]byte)
		if err := fn(p.Key, last, p.Value); err != nil {
			return err
		}
	}
	return nil
}
