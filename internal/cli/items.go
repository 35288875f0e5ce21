package cli

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// Item is one item in the --json output of list, peek and pop. Value is the
// item as text when it is valid UTF-8; otherwise ValueBase64 holds its bytes.
// The place fields present depend on the layout.
type Item struct {
	Index        *int64  `json:"index,omitempty"`        // indexed fifo: the key's index
	Versionstamp string  `json:"versionstamp,omitempty"` // versionstamp fifo: the key's versionstamp
	Priority     *int64  `json:"priority,omitempty"`     // priority queue: the item's priority
	Count        *int64  `json:"count,omitempty"`        // priority queue (list): order within the priority
	Value        *string `json:"value,omitempty"`        // the item, when it is UTF-8
	ValueBase64  string  `json:"value_base64,omitempty"` // the item, when it is not
	// Foreign is set for a key in the queue's range that is not a queue
	// item of this layout (or a value that does not decode): why.
	Foreign string `json:"foreign,omitempty"`
	KeyHex  string `json:"key_hex,omitempty"` // set with Foreign
}

func jsonItem(e entry) Item {
	it := Item{Index: e.Index, Priority: e.Priority, Count: e.Count, Foreign: e.Foreign}
	if e.Versionstamp != nil {
		it.Versionstamp = e.Versionstamp.String()
	}
	if utf8.Valid(e.Value) {
		v := string(e.Value)
		it.Value = &v
	} else {
		it.ValueBase64 = base64.StdEncoding.EncodeToString(e.Value)
	}
	if e.Foreign != "" {
		it.KeyHex = fmt.Sprintf("%x", e.Key)
	}
	return it
}

// place is the text form of an entry's place in the queue.
func place(e entry) string {
	switch {
	case e.Foreign != "":
		return fmt.Sprintf("not an item (%s), key %x", e.Foreign, e.Key)
	case e.Priority != nil:
		return fmt.Sprintf("priority %d #%d", *e.Priority, *e.Count)
	case e.Versionstamp != nil:
		return e.Versionstamp.String()
	case e.Index != nil:
		return fmt.Sprintf("index %d", *e.Index)
	}
	return "?"
}

func setupList(fs *flag.FlagSet) func(context.Context, *session, []string) error {
	return setupListing(fs, 100, false)
}

func setupPeek(fs *flag.FlagSet) func(context.Context, *session, []string) error {
	return setupListing(fs, 1, true)
}

// setupListing is list (default limit 100) and peek (default limit 1; an
// empty queue is an error, ErrEmpty, as the layers' Peek).
func setupListing(fs *flag.FlagSet, defLimit int, emptyIsError bool) func(context.Context, *session, []string) error {
	limit := fs.Int("limit", defLimit, "most items to show (0: all)")
	asJSON := fs.Bool("json", false, "print a JSON array")
	fromMax := fs.Bool("max", false, "priority queue: start from the largest priority")
	return func(ctx context.Context, s *session, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *limit < 0 {
			return usagef(ErrBadArgument, "--limit %d: want 0 (all) or more", *limit)
		}
		if *fromMax && s.spec.Kind != Priority {
			return usagef(ErrBadArgument, "--max needs --kind priority")
		}
		t, err := s.open(ctx)
		if err != nil {
			return err
		}
		es, err := t.readEntries(ctx, s.db, *limit, *fromMax)
		if err != nil {
			return err
		}
		if len(es) == 0 && emptyIsError {
			return &EmptyError{Queue: pathString(s.spec.Path)}
		}
		return writeList(s, es, *asJSON, jsonItem, "(empty)", func(w io.Writer) {
			for i, e := range es {
				fmt.Fprintf(w, "%4d  %-40s %s\n", i+1, place(e), strconv.Quote(string(e.Value)))
			}
		})
	}
}

func setupPush(fs *flag.FlagSet) func(context.Context, *session, []string) error {
	priority := fs.Int64("priority", 0, "priority queue: the items' priority")
	stdin := fs.Bool("stdin", false, "push one item per line of standard input, after any arguments: an empty line is an empty item, "+
		"a final newline adds no item, and a \\r that ends a line is dropped (CRLF input gives the items LF input gives)")
	return func(ctx context.Context, s *session, args []string) error {
		values := make([][]byte, 0, len(args))
		for _, a := range args {
			values = append(values, []byte(a))
		}
		if *stdin {
			// bufio.ScanLines: a line ends at \n or at the end of the
			// input, and loses one \r before its end.
			sc := bufio.NewScanner(s.env.Stdin)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				values = append(values, []byte(sc.Text()))
			}
			if err := sc.Err(); err != nil {
				return fmt.Errorf("reading stdin: %w", err)
			}
		}
		if len(values) == 0 {
			return usagef(ErrBadArgument, "nothing to push (give values as arguments, or --stdin)")
		}
		if s.spec.Kind != Priority && *priority != 0 {
			return usagef(ErrBadArgument, "--priority needs --kind priority")
		}
		t, err := s.openQueue(ctx, false)
		if err != nil {
			return err
		}
		n, err := t.push(ctx, s, values, *priority)
		if err != nil {
			return fmt.Errorf("pushed %d of %d items: %w", n, len(values), err)
		}
		_, err = fmt.Fprintf(s.env.Stdout, "pushed %s to %s\n", plural(n, "item"), pathString(s.spec.Path))
		return err
	}
}

// pushChunk is how many items one EnqueueBatch transaction carries; a chunk
// that exceeds the batch budget is split (fdbqueue.ErrBatchTooLarge).
const pushChunk = 256

// push adds values in order: a FIFO queue in EnqueueBatch transactions, a
// priority queue with one Push (one transaction) per item. Each call is
// exactly once (the layers' journal, and settle). It returns how many were
// added before an error.
func (t *target) push(ctx context.Context, s *session, values [][]byte, priority int64) (int, error) {
	if t.pq != nil {
		for i, v := range values {
			_, err := settle(ctx, func(ctx context.Context, id fdbqueue.OpOption) (struct{}, error) {
				return struct{}{}, t.pq.Push(ctx, s.db, v, priority, id)
			})
			if err != nil {
				return i, err
			}
		}
		return len(values), nil
	}
	done := 0
	for done < len(values) {
		n := min(pushChunk, len(values)-done)
		for {
			_, err := settle(ctx, func(ctx context.Context, id fdbqueue.OpOption) (struct{}, error) {
				return struct{}{}, t.q.EnqueueBatch(ctx, s.db, values[done:done+n], id)
			})
			if errors.Is(err, fdbqueue.ErrBatchTooLarge) && n > 1 {
				n /= 2
				continue
			}
			if err != nil {
				return done, err
			}
			break
		}
		done += n
	}
	return done, nil
}

// settleTimeout bounds settle's second call.
const settleTimeout = 10 * time.Second

// settle runs op with an operation ID of its own. If op fails with an error
// for which kv.MaybeCommitted is true (the context ended while a commit was
// in flight: Ctrl-C at the wrong moment), it runs op once more with the same
// ID, under a context that is not cancelled (at most settleTimeout): if the
// first call committed, the layer's journal returns its result (the items a
// pop removed are printed, not lost) and applies nothing again; if it did
// not, the operation happens now. Either way it happened exactly once.
//
// If that second call fails too (the database unreachable for
// settleTimeout), the error says the operation may have taken effect and
// names its ID: what it removed, if it committed, is then in its journal
// record (kept for the journal retention), not printed, and the command's
// counts leave it out.
func settle[T any](ctx context.Context, op func(context.Context, fdbqueue.OpOption) (T, error)) (T, error) {
	opID := fdbqueue.NewOpID()
	id := fdbqueue.WithOpID(opID)
	v, err := op(ctx, id)
	if err == nil || !kv.MaybeCommitted(err) {
		return v, err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	v, err2 := op(sctx, id)
	if err2 != nil {
		return v, fmt.Errorf("%w (outcome unknown: operation %s may have taken effect, and what it removed is then in its journal record, not printed; settling it failed: %w)", err, opID, err2)
	}
	return v, nil
}

func setupPop(fs *flag.FlagSet) func(context.Context, *session, []string) error {
	n := fs.Int("n", 1, "most items to remove, in one transaction")
	fromMax := fs.Bool("max", false, "priority queue: pop the largest priority (default the smallest)")
	asJSON := fs.Bool("json", false, "print a JSON array")
	return func(ctx context.Context, s *session, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *n < 1 {
			return usagef(ErrBadArgument, "-n %d: want at least 1", *n)
		}
		if *fromMax && s.spec.Kind != Priority {
			return usagef(ErrBadArgument, "--max needs --kind priority")
		}
		t, err := s.open(ctx)
		if err != nil {
			return err
		}
		items, err := t.pop(ctx, s, *n, *fromMax)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			return &EmptyError{Queue: pathString(s.spec.Path)}
		}
		if err != nil {
			return err
		}
		if *asJSON {
			out := make([]Item, len(items))
			for i, it := range items {
				out[i] = jsonItem(entry{Value: it.Value, Priority: it.priority})
			}
			return writeJSON(s, out)
		}
		for _, it := range items {
			if _, err := fmt.Fprintf(s.env.Stdout, "%s\n", it.Value); err != nil {
				return err
			}
		}
		return nil
	}
}

type popped struct {
	Value    []byte
	priority *int64
}

// pop removes up to n items in one transaction (Dequeue/DequeueBatch,
// PopMin/PopMax and their batch forms), exactly once (see settle):
// fdbqueue.ErrEmpty when there are none. A single pop given the database
// is staged when the spec says so.
func (t *target) pop(ctx context.Context, s *session, n int, fromMax bool) ([]popped, error) {
	if t.pq != nil {
		its, err := settle(ctx, func(ctx context.Context, id fdbqueue.OpOption) ([]fdbqueue.Item, error) {
			var it fdbqueue.Item
			var err error
			switch {
			case n == 1 && fromMax:
				it, err = t.pq.PopMax(ctx, s.db, id)
			case n == 1:
				it, err = t.pq.PopMin(ctx, s.db, id)
			case fromMax:
				return t.pq.PopMaxBatch(ctx, s.db, n, id)
			default:
				return t.pq.PopMinBatch(ctx, s.db, n, id)
			}
			return []fdbqueue.Item{it}, err
		})
		if err != nil {
			return nil, err
		}
		out := make([]popped, len(its))
		for i, it := range its {
			p := it.Priority
			out[i] = popped{Value: it.Value, priority: &p}
		}
		return out, nil
	}
	vs, err := settle(ctx, func(ctx context.Context, id fdbqueue.OpOption) ([][]byte, error) {
		if n == 1 {
			v, err := t.q.Dequeue(ctx, s.db, id)
			return [][]byte{v}, err
		}
		return t.q.DequeueBatch(ctx, s.db, n, id)
	})
	if err != nil {
		return nil, err
	}
	out := make([]popped, len(vs))
	for i, v := range vs {
		out[i] = popped{Value: v}
	}
	return out, nil
}

// plural is "1 item", "2 items".
func plural[N int | int64](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
