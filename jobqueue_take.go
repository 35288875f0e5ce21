package fdbqueue

import (
	"bytes"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// take leases up to n of the candidates kvs in tr, and adds the keys it
// takes to *mine. It stops early when the next candidate would take the
// transaction, as FoundationDB counts its size, over the batch budget
// (the first candidate is always handled). kvs is a read of at most limit
// keys of the due range, which ends at dueEnd: when the read was full and
// take only buried the candidates it handled, it reads on past them (twice
// as many, up to maxBuryRead, with a snapshot read, as the first), so that
// a Lease reports ErrEmpty only when no job is due or its budget went to
// burials.
func (q *JobQueue) take(tr kv.Transaction, o *op, kvs []kv.KeyValue, limit int, dueEnd []byte, n int, now time.Time, d time.Duration, mine *[]string) ([]Lease, error) {
	// The journal read, its record(s), clean-ups and expiry, the signal.
	sp := spend{used: o.overheadCost(q.items) + o.recordCost(0, nil), budget: q.budget}
	handled := 0
	type taken struct {
		at    int
		lease Lease
		value kv.FutureValue
	}
	var got []taken
	var firstErr error
	for {
		order := q.takeOrder(kvs)
		buried, stopped := 0, false
		for _, i := range order {
			if len(got) == n {
				break
			}
			p := kvs[i]
			_, id, err := q.parseItemKey(p.Key)
			var m jobMeta
			if err == nil {
				m, err = decodeMeta(p.Key, p.Value, id)
			}
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue // leave a foreign key alone; take the others
			}
			bury := m.attempts >= m.maxAttempts
			cost := q.leaseCost(o, m, p.Key, len(got), bury, buryReason)
			if handled > 0 && !sp.fits(cost) {
				stopped = true
				break
			}
			sp.used += cost
			handled++
			// The snapshot read plus this conflict range is a normal read of
			// this one key. It must come before the writes: FDB leaves keys the
			// transaction wrote out of explicit read conflict ranges.
			if err := tr.AddReadConflictKey(p.Key); err != nil {
				return nil, err
			}
			q.picking.add(p.Key)
			*mine = append(*mine, string(p.Key))
			if bury {
				q.bury(tr, m, p.Key, now, string(buryReason))
				buried++
				continue
			}
			tr.Clear(p.Key)
			q.unbucket(tr, m)
			if m.lease == nil {
				tr.Add(q.leased, one)
			} else {
				q.journal.track.obs.leaseExpired(tr, m.id, m.attempts)
			}
			var lid [16]byte
			_, _ = rand.Read(lid[:])
			m.lease = lid[:]
			m.attempts++
			m.vest = now.Add(d).UnixMicro()
			q.put(tr, m)
			q.bucket(tr, "e", m.vest, 1)
			l := m.toLease()
			l.key = m.queueKey(q)
			got = append(got, taken{at: i, lease: l, value: tr.Snapshot().Get(q.key("v", m.id[:]))})
		}
		if len(got) > 0 || stopped || buried == 0 || len(kvs) < limit {
			break
		}
		// Only burials so far, and more keys may be due past this read.
		after := append(bytes.Clone(kvs[len(kvs)-1].Key), 0x00)
		limit = min(2*limit, maxBuryRead)
		var err error
		kvs, err = tr.Snapshot().GetRange(kv.KeyRange{Begin: after, End: dueEnd},
			kv.RangeOptions{Limit: limit, Mode: kv.StreamingModeExact}).GetSlice()
		if err != nil {
			return nil, err
		}
	}
	if len(got) == 0 && firstErr != nil {
		return nil, firstErr
	}
	sort.Slice(got, func(a, b int) bool { return got[a].at < got[b].at })
	out := make([]Lease, len(got))
	for i, g := range got {
		v, err := g.value.Get()
		if err != nil {
			return nil, err
		}
		if v == nil {
			return nil, &ForeignKeyError{Key: q.key("v", g.lease.JobID[:]), Reason: "job value missing"}
		}
		g.lease.Value = v
		out[i] = g.lease
	}
	return out, nil
}

// maxBuryRead bounds the reads with which take goes on past candidates it
// buried.
const maxBuryRead = 1024

// takeOrder is the order in which take tries the candidates kvs: key
// order when JobQueueConfig.Choice is 1, else a random one, with the
// candidates that other calls on this JobQueue value are taking right now
// last (those would conflict).
func (q *JobQueue) takeOrder(kvs []kv.KeyValue) []int {
	order := make([]int, len(kvs))
	for i := range order {
		order[i] = i
	}
	if q.cfg.Choice > 1 {
		mrand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		busy := q.picking.busy(kvs)
		sort.SliceStable(order, func(a, b int) bool { return !busy[order[a]] && busy[order[b]] })
	}
	return order
}

// buryReason is the reason a job whose last lease expired dies with.
var buryReason = []byte("lease expired on the last attempt")

func (m jobMeta) toLease() Lease {
	l := Lease{JobID: m.id, Attempt: m.attempts, MaxAttempts: m.maxAttempts, Deadline: time.UnixMicro(m.vest),
		Priority: m.prio, UniqueKey: string(m.unique), Reason: string(m.reason)}
	copy(l.ID[:], m.lease)
	return l
}

// unbucket removes m from the time bucket it is counted in.
func (q *JobQueue) unbucket(tr kv.Transaction, m jobMeta) {
	if m.lease == nil {
		q.bucket(tr, "p", m.vest, -1)
	} else {
		q.bucket(tr, "e", m.vest, -1)
	}
}

// bury moves the job whose record m is at key to the dead-letter list.
func (q *JobQueue) bury(tr kv.Transaction, m jobMeta, key []byte, now time.Time, reason string) {
	q.journal.track.obs.deadLettered(tr, m.id, reason)
	tr.Clear(key)
	q.unbucket(tr, m)
	if m.lease != nil {
		tr.Add(q.leased, minusOne)
	}
	tr.Add(q.total, minusOne)
	tr.Add(q.deadN, one)
	if len(m.unique) > 0 {
		tr.Clear(q.key("u", m.unique)) // held by this job while it was in the queue
	}
	if reason != "" {
		m.reason = cutReason(reason)
	}
	m.lease = nil
	m.deadAt = now.UnixMicro()
	dk := m.deadKey(q)
	tr.Set(dk, m.encode())
	tr.Set(q.key("x", m.id[:]), dk)
}

func cutReason(s string) []byte {
	b := []byte(s)
	if len(b) > MaxReasonSize {
		b = b[:MaxReasonSize]
	}
	return b
}

// replayLeases rebuilds the leases of an attempt that committed from its
// journal record: those still held. A job acked, nacked, released or
// cancelled since, or leased again after its lease expired, is left out.
// The keys and values of all the jobs are read together: one round trip,
// however many jobs the lease took. A job whose record is no longer at the
// key of the recorded deadline (extended since, or gone) is looked up
// through its ID index, as lookup does: two more round trips, for all such
// jobs together.
func (q *JobQueue) replayLeases(tr kv.Transaction, prev [][]byte) ([]Lease, error) {
	type replayed struct {
		m        jobMeta
		key, lid []byte
		rec, val kv.FutureValue
		x        kv.FutureValue // the ID index, read when the record moved
	}
	var rs []replayed
	for _, p := range prev {
		if len(p) == 0 {
			continue // an attempt that leased nothing
		}
		t, err := tuple.Unpack(p)
		if err != nil || len(t) != 4 {
			return nil, fmt.Errorf("%w: bad lease record", ErrForeignKey)
		}
		id, ok1 := t[0].([]byte)
		lid, ok2 := t[1].([]byte)
		dl, ok3 := t[2].(int64)
		prio, ok4 := t[3].(int64)
		if !ok1 || !ok2 || !ok3 || !ok4 || len(id) != 16 || len(lid) != 16 {
			return nil, fmt.Errorf("%w: bad lease record", ErrForeignKey)
		}
		r := replayed{m: jobMeta{vest: dl, prio: int32(prio)}, lid: lid}
		copy(r.m.id[:], id)
		r.key = r.m.queueKey(q)
		r.rec, r.val = tr.Get(r.key), tr.Snapshot().Get(q.key("v", r.m.id[:]))
		rs = append(rs, r)
	}
	recs := make([][]byte, len(rs))
	moved := false
	for i := range rs {
		rec, err := rs[i].rec.Get()
		if err != nil {
			return nil, err
		}
		if recs[i] = rec; rec == nil {
			rs[i].x, moved = tr.Get(q.key("x", rs[i].m.id[:])), true
		}
	}
	if moved {
		for i := range rs {
			if rs[i].x == nil {
				continue
			}
			key, at, err := q.jobKey(rs[i].x, rs[i].m.id)
			if err != nil {
				return nil, err
			}
			if at == jobQueued {
				rs[i].key, rs[i].rec = key, tr.Get(key)
			} else {
				rs[i].rec = nil // gone from the queue
			}
		}
		for i := range rs {
			if rs[i].x == nil || rs[i].rec == nil {
				continue
			}
			rec, err := rs[i].rec.Get()
			if err != nil {
				return nil, err
			}
			recs[i] = rec
		}
	}
	var out []Lease
	for i, r := range rs {
		if recs[i] == nil {
			continue
		}
		m, err := decodeMeta(r.key, recs[i], r.m.id)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(m.lease, r.lid) {
			continue
		}
		v, err := r.val.Get()
		if err != nil {
			return nil, err
		}
		l := m.toLease()
		l.Value, l.key = v, r.key
		out = append(out, l)
	}
	return out, nil
}

// picking is what Lease calls on one JobQueue value are taking (between
// their choice and the end of their transaction) and have taken within
// the last MVCC window (5 s: no transaction reads at an older version, so
// no snapshot can show those jobs as due any longer). Lease tries the
// other candidates first, so that workers sharing a JobQueue value (one
// process, a pool) do not pick the same job and conflict; workers in
// other processes are kept apart by the random choice alone.
type picking struct {
	mu       sync.Mutex
	keys     map[string]int       // being taken
	recent   map[string]time.Time // taken, until then
	releases int
}

const pickMemory = 5 * time.Second

func (p *picking) add(key []byte) {
	p.mu.Lock()
	if p.keys == nil {
		p.keys, p.recent = map[string]int{}, map[string]time.Time{}
	}
	p.keys[string(key)]++
	p.mu.Unlock()
}

// release ends the picks of one attempt; taken says that it committed.
func (p *picking) release(keys []string, taken bool) {
	if len(keys) == 0 {
		return
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		if p.keys[k]--; p.keys[k] <= 0 {
			delete(p.keys, k)
		}
		if taken {
			p.recent[k] = now.Add(pickMemory)
		}
	}
	if p.releases++; p.releases%256 == 0 {
		for k, until := range p.recent {
			if now.After(until) {
				delete(p.recent, k)
			}
		}
	}
}

// busy reports, for each candidate, whether another call is taking it or
// took it recently.
func (p *picking) busy(kvs []kv.KeyValue) []bool {
	out := make([]bool, len(kvs))
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range kvs {
		until, ok := p.recent[string(c.Key)]
		out[i] = p.keys[string(c.Key)] > 0 || (ok && now.Before(until))
	}
	return out
}
