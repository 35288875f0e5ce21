package fdbqueue_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
)

// A pop reads its end with a normal read and so depends on it, up to the
// item it takes: FDB adds the range a read's result depended on, [begin,
// keyAfter(last)) forwards and [last, end) in reverse, to the read
// conflict ranges (addConflictRange for GetRangeReq in fdbclient/
// ReadYourWrites.actor.cpp). An item is keyed (priority, count, random),
// the count one past the last of its priority, so a push lands ahead of
// what PopMin read exactly when its priority is smaller, and inside what
// PopMax read when its priority is at least as large: those pushes make
// the pop conflict, and its retry takes the new extreme; the others do
// not. (PopMin's conflicts are not Queue.Dequeue's, which no producer
// causes.) The pop's commit is held while the push commits.
func TestPriorityQueuePopConflictsWithPushesAhead(t *testing.T) {
	for _, c := range []struct {
		max      bool
		push     int64
		conflict bool
	}{
		{max: false, push: 4, conflict: true},
		{max: false, push: 5},
		{max: false, push: 6},
		{max: true, push: 4},
		{max: true, push: 5, conflict: true},
		{max: true, push: 6, conflict: true},
	} {
		t.Run(fmt.Sprintf("max=%v/push=%d", c.max, c.push), func(t *testing.T) {
			ctx := context.Background()
			db := newDB(t)
			pq := mustPQ(t, "pop-conflicts")
			require.NoError(t, pq.Push(ctx, db, []byte("old"), 5))
			held, release := db.HoldNextCommit()
			type res struct {
				it  fdbqueue.Item
				err error
			}
			done := make(chan res, 1)
			go func() {
				var r res
				if c.max {
					r.it, r.err = pq.PopMax(ctx, db)
				} else {
					r.it, r.err = pq.PopMin(ctx, db)
				}
				done <- r
			}()
			<-held
			before := db.Stats().Conflicts
			require.NoError(t, pq.Push(ctx, db, []byte("new"), c.push))
			release()
			r := <-done
			require.NoError(t, r.err)
			require.Equal(t, c.conflict, db.Stats().Conflicts > before, "conflicted")
			want := "old"
			if c.conflict {
				want = "new" // the retry took the new extreme
			}
			require.Equal(t, want, string(r.it.Value))
		})
	}
}
