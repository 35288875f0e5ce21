package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Kind is the queue layer a queue was written with.
type Kind int

// The queue kinds.
const (
	FIFO     Kind = iota // fdbqueue.Queue
	Priority             // fdbqueue.PriorityQueue
	Jobs                 // fdbqueue.JobQueue: stats and the job commands only
)

// String returns "fifo", "priority" or "jobs", as the --kind flag takes it.
func (k Kind) String() string {
	switch k {
	case Priority:
		return "priority"
	case Jobs:
		return "jobs"
	}
	return "fifo"
}

// Layout is how a FIFO queue keys its items.
type Layout int

// The key layouts.
const (
	Indexed      Layout = iota // (index, random): the recipes' layout
	Versionstamp               // (versionstamp, random): fdbqueue.WithVersionstampOrder
)

// String returns "indexed" or "versionstamp", as the --layout flag takes it.
func (l Layout) String() string {
	if l == Versionstamp {
		return "versionstamp"
	}
	return "indexed"
}

// QueueSpec names a queue and says how it was written: every client of a
// queue must agree on these.
type QueueSpec struct {
	Path     tuple.Tuple // the subspace's tuple, e.g. ("myapp", "jobs")
	Kind     Kind
	Layout   Layout
	Encoding fdbqueue.ValueEncoding
	// Staging is "off", "place" or "batches": as the queue's consumers
	// stage (fdbqueue.WithStaging). With staging, push wakes waiting
	// consumers at once (a staged enqueue bumps the key they sleep on;
	// otherwise they notice at their next renewal) and a single pop stages;
	// a queue served by place must be popped by place.
	Staging string
}

// ParseQueuePath turns "myapp/jobs" into the tuple ("myapp", "jobs"). Each
// element is a non-empty UTF-8 string; a path that is empty, or has an empty
// element (a leading, trailing or doubled "/"), fails with ErrBadQueuePath.
func ParseQueuePath(s string) (tuple.Tuple, error) {
	if s == "" {
		return nil, usagef(ErrBadQueuePath, "empty (want a tuple path such as myapp/jobs)")
	}
	if !utf8.ValidString(s) {
		return nil, usagef(ErrBadQueuePath, "%q is not valid UTF-8", s)
	}
	parts := strings.Split(s, "/")
	t := make(tuple.Tuple, len(parts))
	for i, p := range parts {
		if p == "" {
			return nil, usagef(ErrBadQueuePath, "%q has an empty element (at %d)", s, i)
		}
		t[i] = p
	}
	return t, nil
}

// ParseKind parses "fifo", "priority" or "jobs".
func ParseKind(s string) (Kind, error) {
	switch s {
	case "fifo":
		return FIFO, nil
	case "priority":
		return Priority, nil
	case "jobs":
		return Jobs, nil
	}
	return 0, usagef(ErrUnknownKind, "%q (want fifo, priority or jobs)", s)
}

// ParseLayout parses "indexed" or "versionstamp".
func ParseLayout(s string) (Layout, error) {
	switch s {
	case "indexed":
		return Indexed, nil
	case "versionstamp":
		return Versionstamp, nil
	}
	return 0, usagef(ErrUnknownLayout, "%q (want indexed or versionstamp)", s)
}

// ParseEncoding parses "raw" or "tuple".
func ParseEncoding(s string) (fdbqueue.ValueEncoding, error) {
	switch s {
	case "raw":
		return fdbqueue.RawValues, nil
	case "tuple":
		return fdbqueue.TupleValues, nil
	}
	return 0, usagef(ErrUnknownEncoding, "%q (want raw or tuple)", s)
}

func encodingName(e fdbqueue.ValueEncoding) string {
	if e == fdbqueue.TupleValues {
		return "tuple"
	}
	return "raw"
}

// specFlags are the flags every command takes to name its queue.
type specFlags struct {
	queue, kind, layout, encoding, staging string
}

func (f *specFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.queue, "queue", "", `the queue's subspace as a tuple path: "myapp/jobs" is ("myapp", "jobs") (required)`)
	fs.StringVar(&f.kind, "kind", "fifo", "queue kind: fifo, priority or jobs (a JobQueue)")
	fs.StringVar(&f.layout, "layout", "indexed", "key layout of a fifo queue: indexed (the recipes') or versionstamp")
	fs.StringVar(&f.encoding, "encoding", "raw", "value encoding: raw (Python recipe) or tuple (Java recipe)")
	fs.StringVar(&f.staging, "staging", "off", "staging as the queue's consumers use it: off, place or batches (push then wakes waiting consumers)")
}

func (f *specFlags) spec() (QueueSpec, error) {
	var s QueueSpec
	var err error
	if s.Path, err = ParseQueuePath(f.queue); err != nil {
		return s, err
	}
	if s.Kind, err = ParseKind(f.kind); err != nil {
		return s, err
	}
	if s.Layout, err = ParseLayout(f.layout); err != nil {
		return s, err
	}
	if s.Encoding, err = ParseEncoding(f.encoding); err != nil {
		return s, err
	}
	switch f.staging {
	case "off", "place", "batches":
		s.Staging = f.staging
	default:
		return s, usagef(ErrUnknownStaging, "%q (want off, place or batches)", f.staging)
	}
	if s.Kind == Jobs && (s.Layout != Indexed || s.Encoding != fdbqueue.RawValues || s.Staging != "off") {
		return s, usagef(ErrUnknownKind, "a job queue takes no --layout, --encoding or --staging")
	}
	if s.Kind == Priority && s.Layout == Versionstamp {
		return s, usagef(ErrUnknownLayout, "a priority queue has only the indexed layout")
	}
	if s.Staging == "place" && (s.Kind != FIFO || s.Layout != Versionstamp) {
		return s, usagef(ErrUnknownStaging, "staging by place needs --kind fifo --layout versionstamp")
	}
	return s, nil
}

// describe is the queue's one-line description, e.g.
// ("myapp", "jobs") fifo queue, indexed keys, raw values.
func (s QueueSpec) describe() string {
	if s.Kind == Jobs {
		return pathString(s.Path) + " job queue"
	}
	if s.Kind == Priority {
		return fmt.Sprintf("%s priority queue, %s values", pathString(s.Path), encodingName(s.Encoding))
	}
	return fmt.Sprintf("%s fifo queue, %s keys, %s values", pathString(s.Path), s.Layout, encodingName(s.Encoding))
}

func pathString(t tuple.Tuple) string {
	parts := make([]string, len(t))
	for i, e := range t {
		parts[i] = fmt.Sprintf("%q", e)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// options are the layer options the spec implies.
func (s QueueSpec) options(extra []fdbqueue.Option) []fdbqueue.Option {
	opts := []fdbqueue.Option{fdbqueue.WithValueEncoding(s.Encoding)}
	if s.Layout == Versionstamp {
		opts = append(opts, fdbqueue.WithVersionstampOrder())
	}
	switch s.Staging {
	case "place":
		opts = append(opts, fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: fdbqueue.ServeByPlace}))
	case "batches":
		opts = append(opts, fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: fdbqueue.ServeInBatches}))
	}
	return append(opts, extra...)
}

// target is an opened queue: exactly one of q and pq is set.
type target struct {
	spec  QueueSpec
	sub   fdbqueue.Subspace
	q     *fdbqueue.Queue
	pq    *fdbqueue.PriorityQueue
	depth DepthSource
}

// open opens the session's queue, checks that something is stored at its
// subspace (requireQueue) and that its stored configuration agrees with
// the flags (see check), before any command reads or writes it.
func (s *session) open(ctx context.Context) (*target, error) {
	return s.openQueue(ctx, true)
}

// openQueue is open; push, which creates a queue, passes mustExist false.
func (s *session) openQueue(ctx context.Context, mustExist bool) (*target, error) {
	sub, err := fdbqueue.NewSubspace(s.spec.Path)
	if err != nil {
		return nil, usagef(ErrBadQueuePath, "%v", err)
	}
	if s.spec.Kind == Jobs {
		return nil, usagef(ErrUnknownKind, "this command does not apply to a job queue (it has stats, dead, requeue-dead, delete-dead, job and cancel)")
	}
	t := &target{spec: s.spec, sub: sub}
	opts := s.spec.options(s.env.QueueOptions)
	if s.spec.Kind == Priority {
		if t.pq, err = fdbqueue.NewPriorityQueue(sub, opts...); err != nil {
			return nil, err
		}
		t.depth = counterDepth{t.pq.Depth}
	} else {
		if t.q, err = fdbqueue.NewQueue(sub, opts...); err != nil {
			return nil, err
		}
		t.depth = counterDepth{t.q.Depth}
	}
	if mustExist {
		if err := s.requireQueue(ctx, sub); err != nil {
			return nil, err
		}
	}
	if err := t.check(ctx, s.db); err != nil {
		return nil, err
	}
	return t, nil
}

// requireQueue fails with a *NoQueueError when no key at all starts with
// sub's prefix: no stored configuration (prefix + 0xff + ("c",)), no item
// or job, no journal record. Cost: one snapshot range read of one key, in
// its own read-only transaction (no conflict with the queue's clients).
// A subspace that holds only other queues' subspaces (--queue myapp when
// the queues are myapp/jobs and myapp/mail) is not empty, and passes.
func (s *session) requireQueue(ctx context.Context, sub fdbqueue.Subspace) error {
	r, err := tuple.PrefixRange(sub.Bytes())
	if err != nil {
		return usagef(ErrBadQueuePath, "%v", err)
	}
	found, err := kv.ReadTransact(ctx, s.db, func(tr kv.ReadTransaction) (bool, error) {
		kvs, err := tr.Snapshot().GetRange(r, kv.RangeOptions{Limit: 1}).GetSlice()
		return len(kvs) > 0, err
	})
	if err != nil {
		return err
	}
	if !found {
		return &NoQueueError{Queue: pathString(s.spec.Path)}
	}
	return nil
}

// check reads the queue's depth counters with the layer's Depth, for the
// check of the stored configuration that every operation of the layers
// makes (on the new handle, the counters and the stored record: snapshot
// reads in one round trip, no write): flags that disagree with the
// queue's stored record fail with fdbqueue.ErrConfigMismatch, and nothing
// is printed as if they were right. The commands that read the queue's keys
// themselves (peek, list, stats) decode them by the flags, so they rely on
// it. A queue without a record (a recipe queue) is read by the flags as
// given; only a versionstamp layout on one holding indexed items is
// refused, as the layers refuse it.
func (t *target) check(ctx context.Context, db kv.ReadTransactor) error {
	var err error
	if t.pq != nil {
		_, err = t.pq.Depth(ctx, db)
	} else {
		_, err = t.q.Depth(ctx, db)
	}
	return err
}

// flagMismatch is a *fdbqueue.ConfigMismatchError with a hint in the
// command line's terms: the flag as given and as the stored record has it.
type flagMismatch struct {
	err  error
	hint string
}

// Error is the layer's message with the hint in flags instead of the
// layer's own, which names Go options.
func (e *flagMismatch) Error() string {
	msg := e.err.Error()
	var me *fdbqueue.ConfigMismatchError
	if errors.As(e.err, &me) && me.Hint() != "" {
		msg = strings.Replace(msg, " ("+me.Hint()+")", "", 1)
	}
	return msg + " (" + e.hint + ")"
}

// Unwrap returns the layer's error (errors.Is fdbqueue.ErrConfigMismatch,
// errors.As *fdbqueue.ConfigMismatchError).
func (e *flagMismatch) Unwrap() error { return e.err }

// jobsLayoutPrefix starts a job queue's stored layout, which ends with
// its StatsResolution ("vesting, buckets of 1s"; see JobQueueConfig).
const jobsLayoutPrefix = "vesting, buckets of "

// explainMismatch adds to a *fdbqueue.ConfigMismatchError in err the flag
// the spec gave for the field that differs and, when the stored value has
// one, the flag that names it; other errors are returned as they are.
func explainMismatch(err error, spec QueueSpec) error {
	var me *fdbqueue.ConfigMismatchError
	if err == nil || !errors.As(err, &me) {
		return err
	}
	var given string
	var stored map[string]string
	switch me.Field {
	case "kind":
		given = "--kind " + spec.Kind.String()
		stored = map[string]string{"queue": "--kind fifo", "priority queue": "--kind priority", "job queue": "--kind jobs"}
	case "layout":
		if w, ok := strings.CutPrefix(me.Handle, jobsLayoutPrefix); ok {
			// A job queue's layout names its stats buckets' width.
			given = "--stats-resolution " + w
			if st, ok := strings.CutPrefix(me.Stored, jobsLayoutPrefix); ok {
				stored = map[string]string{me.Stored: "--stats-resolution " + st}
			}
			break
		}
		given = "--layout " + spec.Layout.String()
		stored = map[string]string{"index": "--layout indexed", "versionstamp": "--layout versionstamp"}
	case "encoding":
		given = "--encoding " + encodingName(spec.Encoding)
		stored = map[string]string{"raw": "--encoding raw", "tuple": "--encoding tuple"}
	case "staging":
		given = "--staging " + spec.Staging
		stored = map[string]string{"place": "--staging place", "batches": "--staging batches"}
	default:
		return err
	}
	hint := "the flags say " + given
	if want, ok := stored[me.Stored]; ok {
		hint += "; the queue's stored configuration says " + want
	}
	return &flagMismatch{err: err, hint: hint}
}
