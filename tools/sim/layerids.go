package sim

import (
	"context"
	"encoding/hex"
	"log/slog"
	"strings"

	"github.com/fdbqueue/fdbqueue"
)

// replayCounter is the slog.Handler a structure is given WithLogger: it
// counts the journal replays (attempts that found their operation's record,
// an earlier attempt having committed) of operations under IDs the layer
// made, which the harness sees no other way. It reads the layers' log line
// for a replay (fdbqueue's metrics.go, observer.replayed): an Info record
// whose message says the operation found its journal record, with the
// attributes op and op_id. Should that line change, the counts stay zero
// and the tests that require them fail.
type replayCounter struct {
	h *harness
	// staged: the structure's takes run staged, under an ID of their own
	// (no slot); its Enqueue and Push still record in slots.
	staged bool
}

func (c *replayCounter) Enabled(_ context.Context, l slog.Level) bool {
	return l == slog.LevelInfo
}

func (c *replayCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *replayCounter) WithGroup(string) slog.Handler      { return c }

func (c *replayCounter) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "found its journal record") {
		return nil
	}
	var op, hexID string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "op":
			op = a.Value.String()
		case "op_id":
			hexID = a.Value.String()
		}
		return true
	})
	b, err := hex.DecodeString(hexID)
	var id fdbqueue.OpID
	if err != nil || len(b) != len(id) {
		return nil
	}
	copy(id[:], b)
	if _, ours := c.h.ids.Load(id); ours {
		return nil
	}
	c.h.layerIDReplays.Add(1)
	if !c.staged || op != "dequeue" && op != "pop" {
		c.h.slotReplays.Add(1)
	}
	return nil
}

// structureOptions returns the options every structure of the seed gets
// last (staged: its takes run staged): the replay counter, and the short
// journal retention, with its clock, if the seed has it.
func (h *harness) structureOptions(staged bool) []fdbqueue.Option {
	opts := []fdbqueue.Option{fdbqueue.WithLogger(slog.New(&replayCounter{h: h, staged: staged}))}
	if h.shortRetention {
		opts = append(opts, fdbqueue.WithJournalRetention(h.cfg.ShortRetention), fdbqueue.WithClock(h.layerClock))
	}
	return opts
}
