package memdb_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// A read still in flight when its transaction is reset, by Reset or by
// OnError's retry, fails with transaction_cancelled (1025), a point read
// as a range read: FoundationDB's reads wait on the transaction's
// resetPromise beside the read itself (readWithConflictRangeRYW and its
// siblings in fdbclient/ReadYourWrites.actor.cpp), and resetRyow sends
// transaction_cancelled to it. A point read returned the value it read at
// the read version of before the reset instead, which the transaction no
// longer holds.
func TestReadInFlightFailsWhenItsTransactionIsReset(t *testing.T) {
	const delay = 50 * time.Millisecond
	db, _ := newDB(t, memdb.WithLatency(memdb.Latency{Read: memdb.Span{Min: delay, Max: delay}}))
	mustSet(t, db, "k", "old")
	for _, c := range []struct {
		name  string
		reset func(tr kv.Transaction)
	}{
		{"Reset", func(tr kv.Transaction) { tr.Reset() }},
		{"OnError", func(tr kv.Transaction) { require.NoError(t, tr.OnError(kv.ErrNotCommitted)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := db.CreateTransaction(context.Background())
			require.NoError(t, err)
			defer tr.Cancel()
			// The read version first: the reads are then past it, in
			// their own delay, when the reset comes.
			_, err = tr.GetReadVersion().Get()
			require.NoError(t, err)
			point := tr.Get([]byte("k"))
			snapPoint := tr.Snapshot().Get([]byte("k"))
			rng := tr.GetRange(kv.KeyRange{Begin: []byte("k"), End: []byte("l")}, kv.RangeOptions{})
			c.reset(tr)
			v, err := point.Get()
			require.ErrorIs(t, err, kv.ErrTransactionCancelled, "a point read in flight at the reset (got %q)", v)
			v, err = snapPoint.Get()
			require.ErrorIs(t, err, kv.ErrTransactionCancelled, "a snapshot point read in flight at the reset (got %q)", v)
			_, err = rng.GetSlice()
			require.ErrorIs(t, err, kv.ErrTransactionCancelled, "a range read in flight at the reset")
			// The transaction works on after the reset (after a Reset
			// that ends a Cancel).
			if c.name == "Cancel" {
				tr.Reset()
			}
			v, err = tr.Get([]byte("k")).Get()
			require.NoError(t, err)
			require.Equal(t, []byte("old"), v)
		})
	}
}

// hookClock is a ManualClock that runs a function armed by the test at
// its next reading, on the goroutine that reads it.
type hookClock struct {
	*memdb.ManualClock
	armed atomic.Pointer[func()]
}

func (c *hookClock) Now() time.Time {
	if f := c.armed.Swap(nil); f != nil {
		(*f)()
	}
	return c.ManualClock.Now()
}

// inFrames reports whether a function whose name ends with name is on the
// caller's stack.
func inFrames(name string) bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, name) {
			return true
		}
		if !more {
			return false
		}
	}
}

// A reset (or Cancel) that comes while a point read in flight is being
// served, past the checks that the transaction was not reset or cancelled
// since the read's issue, fails the read with transaction_cancelled too (see
// TestReadInFlightFailsWhenItsTransactionIsReset: FDB's reads wait on
// resetPromise, fdbclient/ReadYourWrites.actor.cpp). The DB's clock, read
// by the store's lookup (the MVCC window check) while the read runs,
// makes the reset at that point, on the read's goroutine: no timing
// involved. The point read ran without the transaction's lock and
// returned the value it read at the read version the reset had dropped;
// range reads hold the lock through theirs.
func TestPointReadServedAcrossResetFails(t *testing.T) {
	for _, c := range []struct {
		name  string
		snap  bool
		reset func(tr kv.Transaction) error
	}{
		{"Reset", false, func(tr kv.Transaction) error { tr.Reset(); return nil }},
		{"Reset snapshot", true, func(tr kv.Transaction) error { tr.Reset(); return nil }},
		{"OnError", false, func(tr kv.Transaction) error { return tr.OnError(kv.ErrNotCommitted) }},
		// Cancel sends transaction_cancelled to resetPromise as well
		// (ReadYourWritesTransaction::cancel).
		{"Cancel", false, func(tr kv.Transaction) error { tr.Cancel(); return nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := &hookClock{ManualClock: memdb.NewManualClock(epoch)}
			// Any read latency makes the read asynchronous: it is what the
			// reset may overtake. Its length plays no part.
			db, _ := newDB(t, memdb.WithClock(clk), memdb.WithLatency(memdb.Latency{Read: memdb.Span{Min: time.Microsecond, Max: time.Microsecond}}))
			mustSet(t, db, "k", "old")
			tr := newTx(t, db)
			defer tr.Cancel()
			_, err := tr.GetReadVersion().Get()
			require.NoError(t, err)
			var inRead bool
			var resetErr error
			hook := func() {
				inRead = inFrames("memdb.(*DB).readPoint")
				resetErr = c.reset(tr)
			}
			clk.armed.Store(&hook)
			var f kv.FutureValue
			if c.snap {
				f = tr.Snapshot().Get([]byte("k"))
			} else {
				f = tr.Get([]byte("k"))
			}
			v, err := f.Get()
			require.Nil(t, clk.armed.Load(), "the clock was read")
			require.True(t, inRead, "the clock's first reading after the issue is the read's own, as it is served")
			require.NoError(t, resetErr)
			require.ErrorIs(t, err, kv.ErrTransactionCancelled, "a point read served across a reset (got %q)", v)
			// The transaction works on after the reset (after a Reset
			// that ends a Cancel).
			if c.name == "Cancel" {
				tr.Reset()
			}
			v, err = tr.Get([]byte("k")).Get()
			require.NoError(t, err)
			require.Equal(t, []byte("old"), v)
		})
	}
}
