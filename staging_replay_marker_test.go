package fdbqueue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// A staged Dequeue under a caller's ID that finds the record of an
// earlier call under that ID (made on another handle, which logged
// nothing of it: another process) returns its item and clears that
// operation's journal keys, its marker included, as a plain call's
// replay does (journal.go, op.applied). The marker used to stay until
// expiry: the staged step reads the record through a held range
// (staging_reads.go), and applied did not see that the read found a
// marker.
func TestStagedReplayClearsTheMarker(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		db, sub, q := stagedQueue(t, "replay-marker", m.opts(fdbqueue.StagingConfig{})...)
		require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
		id := fdbqueue.NewOpID()
		// In a caller's transaction, whose commit applies but reports
		// commit_unknown_result_fatal (1022, not retried): the record and
		// the marker stay for a call under the ID.
		db.FailNextCommit(kv.ErrCommitUnknownResultFatal, true)
		err := db.Transact(ctx, func(tr kv.Transaction) error {
			_, err := q.Dequeue(ctx, tr, fdbqueue.WithOpID(id))
			return err
		})
		require.True(t, kv.MaybeCommitted(err), "%v", err)
		require.Len(t, rangeKeys(t, db, fdbqueue.JournalRecordRange(q, id)), 2, "the record and the marker")

		other := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{})...)
		v, err := other.Dequeue(ctx, db, fdbqueue.WithOpID(id))
		require.NoError(t, err)
		require.Equal(t, "x", string(v))
		settleQueue(t, db, other) // carries the clear the replay left pending
		require.Empty(t, rangeKeys(t, db, fdbqueue.JournalRecordRange(q, id)), "the record and the marker are cleared")
	})
}
