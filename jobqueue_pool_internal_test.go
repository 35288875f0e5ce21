package fdbqueue

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/memdb"
)

// TestPoolSettlesAHandlerThatReturnedAsThePoolAbandonedIt: a handler that
// returned just as the pool abandoned its in-flight jobs at shutdown
// (Run's abandoned flag is set when process reaches its settling) is
// settled by what it returned if that was nil or Snooze: its work is done,
// so acking it keeps it from running twice. Any other error is taken for
// the abandonment's cancellation: the job is released, its attempt not
// counted, not nacked (with MaxAttempts 1, a nack would dead-letter it).
// Before, every such job was released, so a job whose handler had
// succeeded ran again. The race is reached here by setting the flag
// before process runs; Run sets it before it cancels the handlers'
// contexts.
func TestPoolSettlesAHandlerThatReturnedAsThePoolAbandonedIt(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		ret    error
		result Result
		stats  JobStats // after the settling
	}{
		{"succeeded", nil, Acked, JobStats{}},
		{"snoozed", Snooze(0), Snoozed, JobStats{Queued: 1, Due: 1}},
		{"failed as its context ended", context.Canceled, Abandoned, JobStats{Queued: 1, Due: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := memdb.New()
			defer db.Close()
			q, err := NewJobQueue(SubspaceFromBytes([]byte("abandon-race")), JobQueueConfig{MaxAttempts: 1})
			require.NoError(t, err)
			_, err = q.Add(ctx, db, Job{Value: []byte("job")})
			require.NoError(t, err)
			ls, err := q.Lease(ctx, db, 1, time.Minute)
			require.NoError(t, err)
			var got []Outcome
			p := &pool{q: q, db: db, log: slog.New(slog.NewTextHandler(io.Discard, nil)), rctx: ctx,
				h: func(context.Context, *Task) error { return c.ret },
				o: PoolOptions{LeaseDuration: time.Minute, ExtendEvery: time.Hour, ReleaseTimeout: DefaultReleaseTimeout,
					OnOutcome: func(o Outcome) { got = append(got, o) }}}
			p.abandoned.Store(true)
			p.process(ctx, 0, ls[0])
			require.Len(t, got, 1)
			require.Equal(t, c.result, got[0].Result, "outcome error: %v", got[0].Err)
			if c.result != Abandoned {
				require.True(t, errors.Is(got[0].Err, c.ret), "the handler's error: %v", got[0].Err)
			} else {
				require.NoError(t, got[0].Err, "released")
			}
			st, err := q.Stats(ctx, db)
			require.NoError(t, err)
			st.OldestDue = 0 // the real clock's
			require.Equal(t, c.stats, st)
			if c.stats.Due == 1 {
				again, err := q.Lease(ctx, db, 1, time.Minute)
				require.NoError(t, err)
				require.Equal(t, 1, again[0].Attempt, "the attempt was not counted")
			}
		})
	}
}

// TestClockDeadlineKeepsAnEarlierParentDeadline: a handler's context under
// PoolOptions.HandlerTimeout reports the earlier of the timeout and its
// parent's deadline, as context.WithDeadline does, so code that sizes its
// own timeouts from ctx.Deadline() does not outlive the parent; it ends
// with the parent's error when the parent ends first.
func TestClockDeadlineKeepsAnEarlierParentDeadline(t *testing.T) {
	clock := stillClock{now: time.Now()}
	parentEnd := time.Now().Add(time.Hour)
	parent, cancel := context.WithDeadline(context.Background(), parentEnd)
	c, release := newClockDeadline(parent, clock, 2*time.Hour)
	defer release()
	d, ok := c.Deadline()
	require.True(t, ok)
	require.Equal(t, parentEnd, d, "the parent's deadline is earlier")

	later, stop := newClockDeadline(context.Background(), clock, time.Minute)
	defer stop()
	d, ok = later.Deadline()
	require.True(t, ok)
	require.Equal(t, clock.Now().Add(time.Minute), d, "no parent deadline: the timeout's")

	cancel()
	<-c.Done()
	require.ErrorIs(t, c.Err(), context.Canceled, "the parent ended first")
	require.False(t, c.timedOut())
}

// stillClock is a Clock whose time stands still and whose timers never fire.
type stillClock struct{ now time.Time }

func (c stillClock) Now() time.Time                     { return c.now }
func (stillClock) After(time.Duration) <-chan time.Time { return nil }
