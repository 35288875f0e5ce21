package sim

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// The lease simulation's payloads span what JobQueue.Add accepts: every
// shape occurs, the limit-sized ones are exactly kv.MaxValueSize bytes and
// the others under it, the fillers hold the bytes their shape names, and
// each payload decodes to its value ID. A payload changed in any way that
// does not make it another value ID's (a byte flipped at the start, middle
// or end, cut short, one byte added) fails to decode, and another value
// ID's payload decodes to that ID, not this one.
func TestLeaseJobValues(t *testing.T) {
	shapes := map[leaseShape]int{}
	for call := int64(1); call <= 600; call++ {
		for i := range 4 {
			id := jobValueID(call, i)
			require.Equal(t, call, id>>8)
			v := leaseJobValue(id)
			shape := leaseShapeOf(id)
			shapes[shape]++
			if shape.limit() {
				require.Len(t, v, kv.MaxValueSize, "%v", shape)
			} else {
				require.Less(t, len(v), kv.MaxValueSize/3, "%v", shape)
				require.GreaterOrEqual(t, len(v), 8)
			}
			switch shape {
			case leaseIDOnly:
				require.Len(t, v, 8)
			case leaseZerosShort, leaseZerosMax:
				require.Equal(t, make([]byte, len(v)-8), v[8:], "%v", shape)
			case leaseFFShort, leaseFFMax:
				require.Equal(t, bytes.Repeat([]byte{0xff}, len(v)-8), v[8:], "%v", shape)
			}
			got, err := decodeLeaseValue(v)
			require.NoError(t, err)
			require.Equal(t, id, got)

			bad := [][]byte{v[:len(v)-1], append(bytes.Clone(v), 0)}
			for _, at := range []int{0, 7, len(v) / 2, len(v) - 1} {
				if at >= 8 || at == 7 { // a flip in the ID may name another ID: checked below
					b := bytes.Clone(v)
					b[at] ^= 0x01
					bad = append(bad, b)
				}
			}
			for _, b := range bad {
				if got, err := decodeLeaseValue(b); err == nil {
					require.NotEqual(t, id, got, "a changed payload of %d (%v) decodes as its own", id, shape)
					require.Equal(t, leaseJobValue(got), b)
				}
			}
			other := leaseJobValue(jobValueID(call+1, i))
			got, err = decodeLeaseValue(other)
			require.NoError(t, err)
			require.NotEqual(t, id, got)
		}
	}
	for s := leaseIDOnly; s <= leaseBinaryMax; s++ {
		require.Positive(t, shapes[s], "shape %v never drawn", s)
	}
	t.Logf("shapes of 2,400 value IDs: %v", shapes)
	_, err := decodeLeaseValue([]byte{1, 2, 3})
	require.Error(t, err, "too short to carry an ID")
}

// The default configuration's batch budgets meet the JobQueue's limits: at
// the smallest, a Lease of two jobs with more due takes one (the budget,
// not the payloads, cuts it), and an AddBatch of two jobs is
// refused if one has a limit-sized payload, accepted if both are small; at
// the middle
// one, an AddBatch of two limit-sized payloads is refused while one of a
// limit-sized and a small one is accepted. checkBudget agrees with each.
func TestLeaseBudgetsMeetLimits(t *testing.T) {
	ctx := context.Background()
	cfg := DefaultLeaseConfig()
	require.Len(t, cfg.BatchBudgets, 3)
	small, mid := cfg.BatchBudgets[0], cfg.BatchBudgets[1]
	limitID, smallID := int64(-1), int64(-1) // value IDs of each kind
	for id := int64(1); limitID < 0 || smallID < 0; id++ {
		switch s := leaseShapeOf(id); {
		case s.limit():
			limitID = id
		case s == leaseIDOnly:
			smallID = id
		}
	}
	job := func(id int64) fdbqueue.Job { return fdbqueue.Job{Value: leaseJobValue(id)} }

	h, err := newLeaseHarness(0, cfg) // seed 0: BatchBudgets[0]
	require.NoError(t, err)
	defer h.db.Close()
	require.Equal(t, small, h.budget)
	for _, id := range []int64{limitID, limitID, smallID, smallID, limitID} {
		_, err := h.q.Add(ctx, h.db, job(id))
		require.NoError(t, err)
	}
	ls, err := h.q.Lease(ctx, h.db, 2, 0)
	require.NoError(t, err)
	require.Len(t, ls, 1, "budget %d", small)
	_, err = h.q.AddBatch(ctx, h.db, []fdbqueue.Job{job(smallID), job(limitID)})
	require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge)
	_, err = h.q.AddBatch(ctx, h.db, []fdbqueue.Job{job(smallID), job(smallID)})
	require.NoError(t, err)

	h2, err := newLeaseHarness(1, cfg) // BatchBudgets[1]
	require.NoError(t, err)
	defer h2.db.Close()
	require.Equal(t, mid, h2.budget)
	two := []fdbqueue.Job{job(limitID), job(limitID)}
	_, err = h2.q.AddBatch(ctx, h2.db, two)
	require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge)
	h2.checkBudget(two, true)
	mixed := []fdbqueue.Job{job(limitID), job(smallID)}
	_, err = h2.q.AddBatch(ctx, h2.db, mixed)
	require.NoError(t, err)
	h2.checkBudget(mixed, false)
	require.Zero(t, h2.budgetErrors)
	// checkBudget's own check: the opposite outcomes are errors.
	h2.checkBudget(two, false)
	h2.checkBudget([]fdbqueue.Job{job(smallID), job(smallID)}, true)
	require.Equal(t, 2, h2.budgetErrors)
}

// A payload swapped with another job's, corrupted (its last byte flipped)
// or cut short to its value ID, as a Lease or a Job lookup reads it back,
// must fail the lease simulation through its payload check
// (LeaseResult.ValueMismatches), not by chance elsewhere. The same runs
// without a plant pass (TestLeaseSimulation).
func TestLeaseSimulationCatchesPlantedPayloads(t *testing.T) {
	cfg := DefaultLeaseConfig()
	cfg.Rounds = 4
	sub, err := fdbqueue.NewSubspace(leaseSubspace)
	require.NoError(t, err)
	values, err := sub.Range("v")
	require.NoError(t, err)
	plants := []struct {
		name  string
		alter func(tr kv.ReadTransaction, key, v []byte) []byte
	}{
		{"swapped with another job's", func(tr kv.ReadTransaction, key, v []byte) []byte {
			kvs, err := tr.Snapshot().GetRange(values, kv.RangeOptions{Limit: 2}).GetSlice()
			if err != nil {
				return v
			}
			for _, p := range kvs {
				if !bytes.Equal(p.Key, key) {
					return p.Value
				}
			}
			return v
		}},
		{"last byte flipped", func(_ kv.ReadTransaction, _, v []byte) []byte {
			v = bytes.Clone(v)
			v[len(v)-1] ^= 0x01
			return v
		}},
		{"cut to its value ID", func(_ kv.ReadTransaction, _, v []byte) []byte { return v[:min(len(v), 8)] }},
	}
	ctx := context.Background()
	for _, p := range plants {
		for _, kind := range []LeaseKind{LLease, LJob} {
			t.Run(p.name+" in a "+kind.String(), func(t *testing.T) {
				c := cfg
				c.plant = func(k LeaseKind, db kv.Database) kv.Database {
					if k != kind {
						return db
					}
					return payloadDB{Database: db, values: values, alter: p.alter}
				}
				for seed := int64(1); seed <= plantSeeds; seed++ {
					r, err := RunLeases(ctx, seed, c)
					require.NoError(t, err)
					if r.ValueMismatches > 0 {
						require.False(t, r.OK())
						t.Logf("seed %d caught it: %d mismatches, the first: %s", seed, r.ValueMismatches, r.ValueMismatch)
						return
					}
				}
				t.Fatal("no seed caught the planted payload")
			})
		}
	}
}

// payloadDB alters, through alter, the job payloads (the keys in values)
// its transactions read.
type payloadDB struct {
	kv.Database
	values kv.KeyRange
	alter  func(tr kv.ReadTransaction, key, v []byte) []byte
}

func (p payloadDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	return p.Database.Transact(ctx, func(tr kv.Transaction) error { return fn(payloadTx{Transaction: tr, p: p}) })
}

func (p payloadDB) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	return p.Database.ReadTransact(ctx, func(tr kv.ReadTransaction) error { return fn(payloadRead{ReadTransaction: tr, p: p}) })
}

// payloadTx is a transaction of payloadDB: its reads, snapshot ones
// included, return the payloads altered.
type payloadTx struct {
	kv.Transaction
	p payloadDB
}

func (t payloadTx) Get(key []byte) kv.FutureValue { return t.p.get(t.Transaction, key) }

func (t payloadTx) Snapshot() kv.ReadTransaction {
	return payloadRead{ReadTransaction: t.Transaction.Snapshot(), p: t.p}
}

// Transact and ReadTransact run fn in the transaction as it is planted
// (see skipClears).
func (t payloadTx) Transact(_ context.Context, fn func(kv.Transaction) error) error { return fn(t) }

func (t payloadTx) ReadTransact(_ context.Context, fn func(kv.ReadTransaction) error) error {
	return fn(t)
}

// payloadRead is a read-only view of payloadDB's, as payloadTx.
type payloadRead struct {
	kv.ReadTransaction
	p payloadDB
}

func (r payloadRead) Get(key []byte) kv.FutureValue { return r.p.get(r.ReadTransaction, key) }

func (r payloadRead) Snapshot() kv.ReadTransaction {
	return payloadRead{ReadTransaction: r.ReadTransaction.Snapshot(), p: r.p}
}

func (r payloadRead) ReadTransact(_ context.Context, fn func(kv.ReadTransaction) error) error {
	return fn(r)
}

// get reads key in tr, altered if it is a payload.
func (p payloadDB) get(tr kv.ReadTransaction, key []byte) kv.FutureValue {
	f := tr.Get(key)
	if bytes.Compare(key, p.values.Begin) < 0 || bytes.Compare(key, p.values.End) >= 0 {
		return f
	}
	v, err := f.Get()
	if err == nil && v != nil {
		v = p.alter(tr, key, v)
	}
	return readValue{v: v, err: err}
}

// readValue is a read's result, known already.
type readValue struct {
	v   []byte
	err error
}

func (r readValue) Get() ([]byte, error) { return r.v, r.err }
