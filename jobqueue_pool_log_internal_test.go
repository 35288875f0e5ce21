package fdbqueue

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// slowLog is a slog.Handler that keeps the messages it handles, each after
// yielding the processor many times (a logger writing to a slow sink), so
// that a line logged after the result it goes with is seen missing.
type slowLog struct {
	mu   sync.Mutex
	msgs []string
}

func (*slowLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *slowLog) Handle(_ context.Context, r slog.Record) error {
	for range 2000 {
		runtime.Gosched()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *slowLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *slowLog) WithGroup(string) slog.Handler      { return h }

func (h *slowLog) logged() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.msgs...)
}

// A handler's panic or runtime.Goexit is logged before call returns its
// end, so before the pool settles the job, reports its outcome, or
// returns from Run: call sent the end first and logged after, so the line
// could come after the job's outcome, or from a goroutine left running
// after Run returned, writing to the caller's logger.
func TestPoolCallLogsAHandlersEndBeforeReturning(t *testing.T) {
	for _, c := range []struct {
		name, msg string
		h         Handler
	}{
		{"panic", "fdbqueue: handler panicked", func(context.Context, *Task) error { panic("kaboom") }},
		{"Goexit", "fdbqueue: handler called runtime.Goexit", func(context.Context, *Task) error { runtime.Goexit(); return nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, err := NewJobQueue(SubspaceFromBytes([]byte("call-log")), JobQueueConfig{})
			require.NoError(t, err)
			h := &slowLog{}
			p := &pool{q: q, h: c.h}
			ctx := context.Background()
			end, returned := p.call(ctx, ctx, &Task{}, nil, slog.New(h))
			require.True(t, returned)
			require.Error(t, end.err)
			require.Equal(t, []string{c.msg}, h.logged(), "logged by the time call returns")
		})
	}
}
