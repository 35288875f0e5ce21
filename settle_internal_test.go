package fdbqueue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// slotJournal returns a journal on a clock the test moves, and a function
// that begins an owned, slotted operation on it (as newCall does).
func slotJournal(t *testing.T, retention time.Duration) (j *journal, now *time.Time, begin func(opts ...OpOption) *op) {
	t.Helper()
	clock := time.Unix(1_700_000_000, 0)
	now = &clock
	cfg, err := newConfig([]Option{WithClock(func() time.Time { return *now }), WithJournalRetention(retention)})
	require.NoError(t, err)
	j = newJournal([]byte("settle"), cfg)
	return j, now, func(opts ...OpOption) *op {
		o := &op{}
		j.beginInto(o, "dequeue", true, true, opts)
		return o
	}
}

// failAfterRecording ends o as an operation whose attempt recorded and
// whose commit's outcome is unknown.
func failAfterRecording(o *op) {
	o.recorded.Store(true)
	o.end(kv.ErrCommitUnknownResultFatal)
}

// Calls under one remembered ID that overlap all resume its slot (each
// reads it, so the one that applies makes the others conflict and then
// find its record); the slot is freed once, when the last returns, and
// only if none of them wrote it. Freed while another still runs, it
// could be taken by a new operation whose record that call would not
// recognise, and overwrite; freed twice, two new operations would share
// it.
func TestSettleOverlappingCallsFreeTheSlotOnce(t *testing.T) {
	for _, wrote := range []bool{false, true} {
		j, _, begin := slotJournal(t, time.Minute)
		first := begin()
		require.True(t, first.slotted)
		failAfterRecording(first)
		require.Empty(t, j.freeSlots)

		r1, r2 := begin(WithOpID(first.id)), begin(WithOpID(first.id))
		for _, r := range []*op{r1, r2} {
			require.True(t, r.resumed)
			require.Equal(t, first.slotKey, r.slotKey, "the remembered slot")
		}
		r1.recorded.Store(wrote)
		r1.end(nil)
		require.Empty(t, j.freeSlots, "another call still holds the slot")
		r2.end(nil)
		if wrote {
			require.Empty(t, j.freeSlots, "a settling call wrote the slot: it stays dropped")
		} else {
			require.Equal(t, []int64{first.slot}, j.freeSlots, "freed once")
		}
		require.Empty(t, j.unsettled, "settled: forgotten")

		late := begin(WithOpID(first.id))
		require.False(t, late.slotted, "a call after the settling one records under the ID, as before")
		late.end(ErrEmpty)
	}
}

// A settling call that fails (ErrEmpty too: the first call's commit may
// still land) leaves the slot remembered and dropped.
func TestSettleFailedCallKeepsTheSlot(t *testing.T) {
	for _, err := range []error{ErrEmpty, kv.ErrCommitUnknownResultFatal} {
		j, _, begin := slotJournal(t, time.Minute)
		first := begin()
		failAfterRecording(first)
		r := begin(WithOpID(first.id))
		require.True(t, r.resumed)
		r.end(err)
		require.Empty(t, j.freeSlots)
		require.Len(t, j.unsettled, 1)
		require.Zero(t, j.unsettled[first.id].busy)
	}
}

// The journal remembers at most maxUnsettled slots, and none of an
// operation older than the retention (a call under its ID fails with
// ErrOperationExpired anyway): past the bound, the oldest is dropped.
func TestSettleRememberedSlotsAreBounded(t *testing.T) {
	j, now, begin := slotJournal(t, time.Minute)
	var ids []OpID
	for range maxUnsettled + 1 {
		*now = now.Add(time.Microsecond) // IDs in order of age
		o := begin()
		failAfterRecording(o)
		ids = append(ids, o.id)
	}
	require.Len(t, j.unsettled, maxUnsettled)
	require.NotContains(t, j.unsettled, ids[0], "the oldest is dropped")
	require.Contains(t, j.unsettled, ids[len(ids)-1])

	*now = now.Add(time.Minute + time.Microsecond)
	o := begin()
	failAfterRecording(o)
	require.Len(t, j.unsettled, 1, "those older than the retention are dropped")
	require.Contains(t, j.unsettled, o.id)
}

// A remembered slot that a settling call is resuming is not the one the
// bound drops: dropped, the call's end found nothing to keep its slot
// under, and if that call failed after writing the slot (its commit may
// still land), a later call under the ID read the records under the ID
// only and applied the operation again. The oldest of the others goes.
func TestSettleBoundKeepsTheSlotBeingResumed(t *testing.T) {
	j, now, begin := slotJournal(t, time.Minute)
	first := begin()
	failAfterRecording(first)
	r := begin(WithOpID(first.id))
	require.True(t, r.resumed)
	var second OpID
	for i := range maxUnsettled {
		*now = now.Add(time.Microsecond) // younger than first
		o := begin()
		failAfterRecording(o)
		if i == 0 {
			second = o.id
		}
	}
	require.Len(t, j.unsettled, maxUnsettled)
	_, kept := j.unsettled[first.id]
	require.True(t, kept, "being resumed: kept")
	_, kept = j.unsettled[second]
	require.False(t, kept, "the oldest of the others is dropped")
	failAfterRecording(r) // the settling call fails after writing the slot
	again := begin(WithOpID(first.id))
	require.True(t, again.resumed, "a later call still resumes the slot")
	require.Equal(t, first.slotKey, again.slotKey)
}
