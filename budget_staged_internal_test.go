package fdbqueue

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// sizingTx records the size each call adds to a transaction as
// FoundationDB's commit counts it against the 10,000,000-byte limit
// (TRANSACTION_SIZE_LIMIT, fdbclient/ClientKnobs.cpp): Transaction::getSize
// (fdbclient/NativeAPI.actor.cpp) is the expected size of the mutations,
// the read conflict ranges and the write conflict ranges, each element
// its bytes plus sizeof(MutationRef), 56, or sizeof(KeyRangeRef), 32
// (VectorRef::expectedSize, flow/include/flow/Arena.h). A Set or an atomic
// op is a mutation (key and value) and the write conflict range
// [key, key+\x00); a Clear of a key a ClearRange mutation of that range
// and the same write conflict range; a ClearRange its mutation and its
// range; a versionstamped key's Set its mutation only
// (ReadYourWritesTransaction::atomicOp adds no conflict for it); a normal
// read of a key, AddReadConflictKey and a watch (RYWImpl::watch reads its
// key with readWithConflictRange, fdbclient/ReadYourWrites.actor.cpp)
// the read conflict range [key, key+\x00). It merges nothing, so its
// total bounds FDB's from above, as the budget's counts must.
type sizingTx struct {
	kv.Transaction
	mu  sync.Mutex
	ops []sizedOp
}

// sizedOp is one call and its size: conflict is set for a conflict range
// alone (a read, a watch, an added conflict range), clear for a mutation
// (with its write conflict range).
type sizedOp struct {
	what     string
	key      []byte
	size     int
	conflict bool
}

func (t *sizingTx) add(what string, key []byte, size int, conflict bool) {
	t.mu.Lock()
	t.ops = append(t.ops, sizedOp{what, bytes.Clone(key), size, conflict})
	t.mu.Unlock()
}

func (t *sizingTx) total() (conflicts, writes int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.ops {
		if o.conflict {
			conflicts += o.size
		} else {
			writes += o.size
		}
	}
	return conflicts, writes
}

// did reports whether the transaction made a call what on key.
func (t *sizingTx) did(what string, key []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.ops {
		if o.what == what && bytes.Equal(o.key, key) {
			return true
		}
	}
	return false
}

// didUnder reports whether the transaction made a call what on a key in r.
func (t *sizingTx) didUnder(what string, r kv.KeyRange) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.ops {
		if o.what == what && inRange(r, o.key) {
			return true
		}
	}
	return false
}

func (t *sizingTx) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b bytes.Buffer
	for _, o := range t.ops {
		fmt.Fprintf(&b, "%s %q: %d\n", o.what, o.key, o.size)
	}
	return b.String()
}

const sizingMut, sizingRange = 56, 32

func pointRange(k []byte) int { return 2*len(k) + 1 + sizingRange }

func (t *sizingTx) Set(k, v []byte) {
	t.add("set", k, len(k)+len(v)+sizingMut+pointRange(k), false)
	t.Transaction.Set(k, v)
}

func (t *sizingTx) Clear(k []byte) {
	t.add("clear", k, 2*len(k)+1+sizingMut+pointRange(k), false)
	t.Transaction.Clear(k)
}

func (t *sizingTx) ClearRange(r kv.KeyRange) {
	t.add("clear range", r.Begin, 2*(len(r.Begin)+len(r.End))+sizingMut+sizingRange, false)
	t.Transaction.ClearRange(r)
}

func (t *sizingTx) Add(k, p []byte) {
	t.add("add", k, len(k)+len(p)+sizingMut+pointRange(k), false)
	t.Transaction.Add(k, p)
}

func (t *sizingTx) SetVersionstampedKey(k, v []byte) {
	t.add("set versionstamped key", k, len(k)+len(v)+sizingMut, false)
	t.Transaction.SetVersionstampedKey(k, v)
}

func (t *sizingTx) SetVersionstampedValue(k, v []byte) {
	t.add("set versionstamped value", k, len(k)+len(v)+sizingMut+pointRange(k), false)
	t.Transaction.SetVersionstampedValue(k, v)
}

func (t *sizingTx) AddReadConflictRange(r kv.KeyRange) error {
	t.add("read conflict range", r.Begin, len(r.Begin)+len(r.End)+sizingRange, true)
	return t.Transaction.AddReadConflictRange(r)
}

func (t *sizingTx) AddReadConflictKey(k []byte) error {
	t.add("read conflict key", k, pointRange(k), true)
	return t.Transaction.AddReadConflictKey(k)
}

func (t *sizingTx) AddWriteConflictRange(r kv.KeyRange) error {
	t.add("write conflict range", r.Begin, len(r.Begin)+len(r.End)+sizingRange, true)
	return t.Transaction.AddWriteConflictRange(r)
}

func (t *sizingTx) AddWriteConflictKey(k []byte) error {
	t.add("write conflict key", k, pointRange(k), true)
	return t.Transaction.AddWriteConflictKey(k)
}

func (t *sizingTx) Watch(k []byte) kv.Watch {
	t.add("watch", k, pointRange(k), true)
	return t.Transaction.Watch(k)
}

func (t *sizingTx) Get(k []byte) kv.FutureValue {
	t.add("get", k, pointRange(k), true)
	return t.Transaction.Get(k)
}

func (t *sizingTx) GetRange(r kv.KeyRange, o kv.RangeOptions) kv.RangeResult {
	t.add("get range", r.Begin, len(r.Begin)+len(r.End)+sizingRange, true)
	return t.Transaction.GetRange(r, o)
}

// Transact and ReadTransact run fn through the wrapper (the embedded
// transaction's would hand fn the unwrapped one).
func (t *sizingTx) Transact(_ context.Context, fn func(kv.Transaction) error) error { return fn(t) }
func (t *sizingTx) ReadTransact(_ context.Context, fn func(kv.ReadTransaction) error) error {
	return fn(t)
}

// handWrittenLine files, for the side s, requests with the given request
// IDs, in that order, waiting until an hour from now, with their
// registrations' markers, and returns their keys. Each ID is 20 bytes,
// as newRID's, of zeros but its last, each zero escaped in the keys: keys
// a byte short of the longest a request can have, all of one length.
func handWrittenLine(t *testing.T, db kv.Database, s *stageSide[[]byte], ids ...byte) (reqKeys [][]byte) {
	t.Helper()
	require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
		reqKeys = nil
		for i, id := range ids {
			rid := make([]byte, ridTimeBytes+ridRandBytes)
			rid[len(rid)-1] = id
			stamp := make([]byte, 10)
			stamp[9] = byte(i + 1)
			k, err := s.reqKeyOf(stamp, rid)
			if err != nil {
				return err
			}
			tr.Set(k, encodeDeadline(time.Now().Add(time.Hour)))
			tr.Set(s.resKey(rid), markerValue)
			reqKeys = append(reqKeys, k)
		}
		return nil
	}))
	return reqKeys
}

// TestStagedStepSpendCoversTheStepsOwnKeys pins stepSpend's terms besides
// the journal's overhead (its conflict keys, a renewal and the clears of
// the waiter's two keys): what a fulfilment step adds to its transaction
// for the waiter's own request, where it serves, drops, expires and moves
// nothing (all of which the step counts as it goes), measured as
// FoundationDB counts it (sizingTx). Each step the term must bound:
//
//   - renewing, then withdrawing (a plain Dequeue the items ran out
//     before): reads of the request and result keys, the renewal, the
//     clears of both keys, and by place a read conflict on the items;
//   - waiting further back, renewing: the reads, the renewal and a watch
//     on the request;
//   - waiting further back without writing: the reads and two watches
//     (the request, and the request ahead);
//   - a helper arming its watches (the request and the signal key).
//
// The term covers every one of these, and, as it is the sum of the most
// conflict ranges and the most writes any of them has, their maxima
// together; by at most one conflict key more (the registration's read
// conflict on its result key, which stepSpend counts but a fulfilment
// never has), the bytes the result key is shorter than the request key,
// and those the renewal's value is shorter than 16. A step that counted
// fewer conflict keys could exceed its budget by their bytes.
func TestStagedStepSpendCoversTheStepsOwnKeys(t *testing.T) {
	ctx := context.Background()
	type scenario struct {
		name    string
		byPlace bool
		ahead   int  // requests ahead of the waiter's own
		wait    bool // DequeueWait, not Dequeue
		renew   bool // its renewal is due
		phase   int  // the transition the step must choose
	}
	var maxC, maxW, term, k, resLen int
	for _, c := range []scenario{
		{name: "renews and withdraws", renew: true, phase: phaseWithdraw},
		{name: "renews and withdraws by place", byPlace: true, renew: true, phase: phaseWithdraw},
		{name: "renews while it waits", ahead: 2, wait: true, renew: true, phase: phaseWait},
		{name: "waits without writing", ahead: 2, wait: true, phase: phaseWait},
		{name: "helper arms", wait: true, phase: phaseFulfil},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := memdb.New()
			defer db.Close()
			serving := ServeInBatches
			if c.byPlace {
				serving = ServeByPlace
			}
			// Names of one length: every scenario has the same keys' lengths.
			name := "step-batch"
			if c.byPlace {
				name = "step-place"
			}
			q, err := NewQueue(SubspaceFromBytes([]byte(name)),
				WithStaging(StagingConfig{Serving: serving}), WithVersionstampOrder())
			require.NoError(t, err)
			s := q.stage
			require.Equal(t, c.byPlace, s.stable)
			ids := make([]byte, c.ahead+1)
			for i := range ids {
				ids[i] = byte(i + 1)
			}
			keys := handWrittenLine(t, db, s, ids...)
			w := &waiter[[]byte]{s: s, db: db, o: s.journal.begin(db, nil), wait: c.wait,
				reqKey: keys[c.ahead], rid: make([]byte, ridTimeBytes+ridRandBytes)}
			w.rid[len(w.rid)-1] = ids[c.ahead]
			w.resKey = s.resKey(w.rid)
			w.renewAt = time.Now().Add(time.Hour)
			if c.renew {
				w.renewAt = time.Now().Add(-time.Second)
			}
			inner, err := db.CreateTransaction(ctx)
			require.NoError(t, err)
			defer inner.Cancel()
			tr := &sizingTx{Transaction: inner}
			out, err := w.step(tr)
			require.NoError(t, err)
			w.cancelWatches()
			require.Equal(t, c.phase, out.phase, "the step's transition")
			require.Zero(t, out.served)
			require.Equal(t, c.renew, tr.did("set", w.reqKey), "the step renewed its request")

			conflicts, writes := tr.total()
			sp := w.stepSpend()
			own := sp.used - w.o.overheadCost(s.items)
			require.LessOrEqual(t, conflicts+writes, own,
				"what the step adds for its own request, as FDB counts it, within stepSpend's terms:\n%s", tr)
			t.Logf("%d bytes of conflict ranges, %d of writes; stepSpend's terms: %d", conflicts, writes, own)
			if term != 0 {
				require.Equal(t, term, own, "every scenario's keys are as long")
			}
			term, k, resLen = own, max(len(w.reqKey), len(w.resKey)), len(w.resKey)
			maxC, maxW = max(maxC, conflicts), max(maxW, writes)
		})
	}
	require.NotZero(t, term)
	require.LessOrEqual(t, maxC+maxW, term, "the most conflict ranges and the most writes of a step, together")
	// The registration's read conflict on its result key; the result key,
	// read and cleared, is counted at the request key's length (2 and 4
	// bytes a byte); the renewal's value at 16 bytes.
	margin := conflictKeyCost(k) + 6*(k-resLen) + 16 - len(encodeDeadline(time.Now()))
	require.LessOrEqual(t, term-(maxC+maxW), margin,
		"stepSpend's terms count no more than that beyond the steps' maxima")
	t.Logf("term %d, maxima %d + %d, margin %d", term, maxC, maxW, margin)
}

// TestStagedHelperSpendCoversItsTransaction pins helperSpend, the size a
// helper's fulfilment (fulfilPass) counts before what it serves, drops and
// expires: the transaction, measured as FoundationDB counts it (sizingTx,
// under the depth tracking every staged operation runs with), fits the
// size counted. Serving only, every other call is counted exactly as it
// is made, and what is left is the depth counter's atomic add, written at
// the commit for the items taken (trackedTx.flush): the term must count
// it, and no more. Expiring results, each result's cost counts a
// bump of the signal key (resultCost), so the one bump the pass makes
// needs nothing more.
func TestStagedHelperSpendCoversItsTransaction(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		served  int // requests and items
		expired int // expired results
	}{{"serves", 5, 0}, {"expires results", 0, 3}, {"both", 4, 2}} {
		t.Run(c.name, func(t *testing.T) {
			db := memdb.New()
			defer db.Close()
			q, err := NewQueue(SubspaceFromBytes([]byte("helper-spend")), WithStaging(StagingConfig{Serving: ServeInBatches}))
			require.NoError(t, err)
			s := q.stage
			ids := make([]byte, c.served)
			for i := range ids {
				ids[i] = byte(i + 1)
			}
			handWrittenLine(t, db, s, ids...)
			values := make([][]byte, c.served)
			for i := range values {
				values[i] = bytes.Repeat([]byte{'v'}, 10+i)
			}
			if c.served > 0 {
				require.NoError(t, q.EnqueueBatch(ctx, db, values))
			}
			require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
				for i := range c.expired {
					key := append(bytes.Clone(s.items.Begin), 0x7f, byte(i))
					rid := []byte(fmt.Sprintf("expired-%d", i))
					tr.Set(s.resKey(rid), encodeResult(time.Now().Add(-time.Hour), key, []byte("stored")))
				}
				return nil
			}))

			inner, err := db.CreateTransaction(ctx)
			require.NoError(t, err)
			defer inner.Cancel()
			sz := &sizingTx{Transaction: inner}
			tr := &trackedTx{Transaction: sz, k: s.journal.track, op: "fulfil"}
			n, sp, err := s.fulfilPass(tr)
			require.NoError(t, err)
			require.Equal(t, c.served, n)
			tr.flush() // the depth change, as Commit writes it
			require.Equal(t, c.served != c.expired, sz.didUnder("add", s.journal.track.depth.all), "a depth change was written")
			require.Equal(t, c.expired > 0, sz.did("add", s.st.sig), "the signal key bumped")

			conflicts, writes := sz.total()
			real := conflicts + writes
			require.LessOrEqual(t, real, sp.used, "the helper's transaction, as FDB counts it, within its count:\n%s", sz)
			t.Logf("%d bytes counted, %d as FDB counts them", sp.used, real)
			if c.expired == 0 {
				// The add goes to a counter picked at random: counter 0's
				// key is a byte shorter than the others (its index packs
				// to one byte), which the count does not know.
				d := s.journal.track.depth
				require.LessOrEqual(t, sp.used-real, 3*(len(d.shard(depthShards-1))-len(d.shard(0))),
					"serving only, the count is the transaction's size")
			}
			require.NoError(t, tr.Commit())
		})
	}
}
