package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Bugs planted in the pools' heartbeat extensions (through
// PoolConfig.plantPools) must fail the pool simulation's long run
// (LongRunProb), by its own checks, within the run's steps: never by the
// harness's one-minute stall guard (errPoolStuck). The harness moved the
// clock by less than the lease while the pools ran before the long run,
// so these were caught, if at all, only by chance (a job hidden past its
// lease at a stop, for the old-deadline plant, in some schedules): the
// control runs each plant without the long run and logs whether any check
// caught it; it does not require either outcome.
//   - An extension that writes nothing (it returns the new lease, but the
//     job keeps its first deadline): the lease expires under its handler
//     once the clock passes it, at the third step at the latest.
//   - An extension that sets the deadline from the old deadline instead of
//     the clock's time (old + LeaseDuration): the lease is never lost,
//     but grows past the clock's time plus LeaseDuration at each
//     extension (HeldDeadlineWrong), and may outlast the next cycle's
//     start (NotDueAtCycle), which once left that cycle's long run
//     waiting for the run of a lease no pool held until the guard fired.
//   - An extension by ExtendEvery instead of LeaseDuration (now +
//     ExtendEvery): the lease expires at the next step, which is at least
//     ExtendEvery.
func TestPoolSimulationCatchesPlantedHeartbeatBugs(t *testing.T) {
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"sim", "pool"})
	require.NoError(t, err)
	plants := []struct {
		name string
		fix  func(old, right int64) int64 // the deadline written (0: none), from the old one and the right one
		lost bool                         // the lease is lost (else only its deadline is wrong)
	}{
		{"an extension writes nothing", func(_, _ int64) int64 { return 0 }, true},
		{"an extension sets the deadline from the old deadline", func(old, _ int64) int64 {
			return old + poolLeaseDuration.Microseconds()
		}, false},
		{"an extension by ExtendEvery instead of LeaseDuration", func(_, right int64) int64 {
			return right - poolLeaseDuration.Microseconds() + poolExtendEvery.Microseconds()
		}, true},
	}
	for _, p := range plants {
		t.Run(p.name, func(t *testing.T) {
			plant := func(db kv.Database) kv.Database {
				return plantedDB{Database: db, tx: func(tr kv.Transaction) kv.Transaction {
					return &extendTx{Transaction: tr, sub: sub, fix: p.fix, read: map[string][]byte{}}
				}}
			}
			for seed := int64(1); seed <= 4; seed++ {
				cfg := DefaultPoolConfig()
				cfg.plantPools = plant
				cfg.LongRunProb = 0 // the control: the harness as it was
				r, err := RunPoolShutdowns(context.Background(), seed, cfg)
				require.NoError(t, err, "seed %d without the long run", seed)
				t.Logf("seed %d without the long run: caught %v", seed, !r.OK())

				cfg.LongRunProb = 1
				start := time.Now()
				r, err = RunPoolShutdowns(context.Background(), seed, cfg)
				require.NotErrorIs(t, err, errPoolStuck, "seed %d: the harness waited for its guard instead of failing a check", seed)
				require.NoError(t, err, "seed %d", seed)
				t.Logf("seed %d caught it in %v: %d long runs, %d steps; lease lost %d, expired %d, attempts grew %d, context ended %d, deadline wrong %d; not due at a cycle's start %d",
					seed, time.Since(start).Round(time.Millisecond), r.LongRuns, r.LongRunSteps,
					r.HeldLeaseLost, r.HeldLeaseExpired, r.HeldAttemptsGrew, r.HeldContextEnded, r.HeldDeadlineWrong, r.NotDueAtCycle)
				require.False(t, r.OK(), "seed %d: the planted bug passed", seed)
				require.Positive(t, r.HeldDeadlineWrong, "seed %d: no wrong deadline seen", seed)
				if p.lost {
					require.Positive(t, r.HeldLeaseLost+r.HeldLeaseExpired, "seed %d: no lost lease seen", seed)
				}
			}
		})
	}
}

// extendTx plants a bug in the extensions among its transaction's writes:
// a Set of a job record ("q") carrying the lease of the record the
// transaction read and cleared (Extend moves the record to its new
// deadline under the same lease; a Lease of an expired lease writes
// another lease, a Nack or Release none). The record is then written
// with the deadline fix returns, its index entry ("x") and the vesting
// counter ("c", "e") that follow it moved along; with 0, the clear and
// the counter's decrement are undone and nothing of the extension is
// written.
type extendTx struct {
	kv.Transaction
	sub  fdbqueue.Subspace
	fix  func(old, right int64) int64
	read map[string][]byte // the job records read, by key
	// Set once the transaction cleared a leased record it read.
	cleared, clearedValue, lease []byte
	minus                        []byte // the counter the clear decremented
	// Set once an extension was found: its record key and the one written
	// instead (nil: none), and its counter and the one added to instead.
	from, to           []byte
	fromCount, toCount []byte
	dropped            bool
}

// kind returns the first element of key's tuple under sub ("q", "x",
// "c", ...) and the tuple.
func (t *extendTx) kind(key []byte) (string, tuple.Tuple) {
	if !t.sub.Contains(key) {
		return "", nil
	}
	k, err := t.sub.Unpack(key)
	if err != nil || len(k) == 0 {
		return "", nil
	}
	s, _ := k[0].(string)
	return s, k
}

// jobRecordLease returns a job record's deadline and lease.
func jobRecordLease(value []byte) (int64, []byte) {
	v, err := tuple.Unpack(value)
	if err != nil || len(v) < 3 {
		return 0, nil
	}
	vest, _ := v[0].(int64)
	lease, _ := v[2].([]byte)
	return vest, lease
}

func (t *extendTx) counter(vest int64) []byte {
	res := leaseStatsResolution.Microseconds()
	b := vest / res
	if vest < 0 && vest%res != 0 {
		b--
	}
	k, _ := t.sub.Pack(tuple.Tuple{"c", "e", b})
	return k
}

func (t *extendTx) Get(key []byte) kv.FutureValue {
	f := t.Transaction.Get(key)
	if k, _ := t.kind(key); k != "q" {
		return f
	}
	return recordRead{f: f, key: string(key), t: t}
}

type recordRead struct {
	f   kv.FutureValue
	key string
	t   *extendTx
}

func (r recordRead) Get() ([]byte, error) {
	v, err := r.f.Get()
	if err == nil && v != nil {
		r.t.read[r.key] = bytes.Clone(v)
	}
	return v, err
}

func (t *extendTx) Clear(key []byte) {
	if v, ok := t.read[string(key)]; ok && t.cleared == nil {
		if _, lease := jobRecordLease(v); lease != nil {
			t.cleared, t.clearedValue, t.lease = bytes.Clone(key), v, lease
		}
	}
	t.Transaction.Clear(key)
}

func (t *extendTx) Add(key, param []byte) {
	k, _ := t.kind(key)
	switch {
	case k != "c":
	case t.from != nil && bytes.Equal(key, t.fromCount) && int64(binary.LittleEndian.Uint64(param)) == 1:
		if !t.dropped {
			t.Transaction.Add(t.toCount, param)
		}
		return
	case t.cleared != nil && t.minus == nil && int64(binary.LittleEndian.Uint64(param)) == -1:
		t.minus = bytes.Clone(key)
	}
	t.Transaction.Add(key, param)
}

func (t *extendTx) Set(key, value []byte) {
	k, tup := t.kind(key)
	switch {
	case k == "q" && t.cleared != nil && t.from == nil:
		vest, lease := jobRecordLease(value)
		if !bytes.Equal(lease, t.lease) {
			break
		}
		old, _ := jobRecordLease(t.clearedValue)
		t.from, t.fromCount = bytes.Clone(key), t.counter(vest)
		fixed := t.fix(old, vest)
		if fixed == 0 {
			t.dropped = true
			t.Transaction.Set(t.cleared, t.clearedValue)
			if t.minus != nil {
				t.Transaction.Add(t.minus, le64Param(1))
			}
			return
		}
		v, _ := tuple.Unpack(value)
		v[0] = fixed
		tup[1] = fixed
		t.to, _ = t.sub.Pack(tup)
		t.toCount = t.counter(fixed)
		value, _ = v.Pack()
		t.Transaction.Set(t.to, value)
		return
	case k == "x" && t.from != nil && bytes.Equal(value, t.from):
		if !t.dropped {
			t.Transaction.Set(key, t.to)
		}
		return
	}
	t.Transaction.Set(key, value)
}

func le64Param(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }

// Transact and ReadTransact run fn in the planted transaction.
func (t *extendTx) Transact(_ context.Context, fn func(kv.Transaction) error) error { return fn(t) }

func (t *extendTx) ReadTransact(_ context.Context, fn func(kv.ReadTransaction) error) error {
	return fn(t)
}
