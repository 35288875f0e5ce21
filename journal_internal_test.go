package fdbqueue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// clearCounter is a transaction that only counts range clears (expire
// issues nothing else).
type clearCounter struct {
	kv.Transaction
	n int
}

func (c *clearCounter) ClearRange(kv.KeyRange) { c.n++ }

// An expiry sweeps a group of shards again only once the group's cutoff
// has moved on by sweepStep (journal.expire): under load, sweeps a few
// microseconds apart would cost 16 range clears each and clear next to
// nothing. A clock that moves back sweeps at once, so a record stamped
// before the new cutoff is never left behind for long.
func TestJournalExpiryStep(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	cfg, err := newConfig([]Option{WithClock(func() time.Time { return now }), WithJournalRetention(time.Minute)})
	require.NoError(t, err)
	j := newJournal([]byte("step"), cfg)
	groups := journalShards / expireShards
	sweep := func() int {
		tr := &clearCounter{}
		for range groups {
			j.expire(tr, 0)
		}
		return tr.n
	}
	full := journalShards + 1 // and the pre-shard layout's range, once
	require.Equal(t, full, sweep(), "the first sweep clears every shard")
	require.Zero(t, sweep(), "the clock has not moved: nothing to sweep again")

	now = now.Add(j.sweepStep() - time.Microsecond)
	require.Zero(t, sweep(), "less than a step on")
	now = now.Add(time.Microsecond)
	require.Equal(t, full, sweep(), "a step on: every group again")
	require.Zero(t, sweep())

	now = now.Add(-time.Hour)
	require.Equal(t, full, sweep(), "a clock that moved back sweeps at once")
	require.Zero(t, sweep())
}

// A slot is held by one operation at a time (journal.takeSlot): an
// operation that ends after its journal started a new epoch must not put
// its old epoch's slot number on the new epoch's free list, where it would
// name the new epoch's slot of that number (held by another operation, or
// not made yet) and two operations in flight would write one slot key.
func TestJournalSlotOfAnEndedEpochIsNotReused(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	cfg, err := newConfig([]Option{WithClock(func() time.Time { return now }), WithJournalRetention(time.Minute)})
	require.NoError(t, err)
	j := newJournal([]byte("epochs"), cfg)
	begin := func() *op {
		o := &op{}
		j.beginInto(o, "", true, true, nil)
		require.True(t, o.slotted)
		return o
	}
	a0, a1 := begin(), begin() // slots 0 and 1 of the first epoch, in flight
	require.NotEqual(t, a0.slotKey, a1.slotKey)

	now = now.Add(j.slotEpochAge())
	b := begin() // a new epoch: its slot 0
	require.NotEqual(t, a0.slotGen, b.slotGen, "a new epoch")
	b.end(nil)
	a1.end(nil) // the first epoch's operations end in the new one
	a0.end(nil)

	live := map[string]bool{}
	for range 3 {
		o := begin()
		require.False(t, live[string(o.slotKey)], "slot %d's key is held by another operation in flight", o.slot)
		live[string(o.slotKey)] = true
	}
}

// A marker names a PopMin "pop min" and a PopMax "pop max"; one written
// by an earlier version of this package, "pop", is taken for either, so
// that a retry across an upgrade finds its record. Any other kind fails
// with ErrInvalidArgument.
func TestMarkerKindOfAPop(t *testing.T) {
	marker := func(kind string) []byte { return append([]byte(kind), make([]byte, 10)...) }
	for _, max := range []bool{false, true} {
		o := &op{kind: "pop", mark: popMark(max)}
		require.NoError(t, o.checkMarker(marker(popMark(max)), nil))
		require.NoError(t, o.checkMarker(marker("pop"), nil), "an earlier version's marker")
		require.ErrorIs(t, o.checkMarker(marker(popMark(!max)), nil), ErrInvalidArgument)
		require.ErrorIs(t, o.checkMarker(marker("push"), nil), ErrInvalidArgument)
	}
	o := &op{kind: "dequeue"}
	require.ErrorIs(t, o.checkMarker(marker("pop"), nil), ErrInvalidArgument, "the earlier pop is no other kind's")
}

// A pop's *UnknownResultError names it "pop", as the metrics and logs do,
// whatever its journal kind: every form of PopMin and PopMax (the staged
// and Wait forms set op.mark as the plain ones do) settles through this.
func TestUnknownResultOfAPopIsNamedPop(t *testing.T) {
	for _, max := range []bool{false, true} {
		o := &op{j: &journal{}, kind: "pop", mark: popMark(max)}
		err := o.unknownResult(kv.ErrCommitUnknownResultFatal)
		var ure *UnknownResultError
		require.ErrorAs(t, err, &ure)
		require.Equal(t, "pop", ure.Op)
	}
}
