package fdbqueue

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// Option configures a Queue, PriorityQueue or JobQueue when it is made
// (NewJobQueue says which options a job queue takes).
type Option func(*config)

type config struct {
	encoding      ValueEncoding
	versionstamps bool
	noJournal     bool
	retention     time.Duration
	batchBudget   int
	entropy       io.Reader
	now           func() time.Time
	staging       *StagingConfig
	obs           obsConfig // metrics and logs (metrics.go)
}

// Defaults of the options.
const (
	// DefaultJournalRetention is the default journal retention (see
	// WithJournalRetention): how long after its ID was made an operation
	// may still retry or be settled; records that nothing clears sooner
	// are kept twice as long.
	DefaultJournalRetention = 10 * time.Minute
	// DefaultBatchBudget is the default batch budget (see WithBatchBudget):
	// FoundationDB recommends transactions near 1 MB; its hard limit is
	// 10 MB.
	DefaultBatchBudget = 1_000_000
)

func newConfig(opts []Option) (config, error) {
	c := config{retention: DefaultJournalRetention, batchBudget: DefaultBatchBudget, now: time.Now}
	for _, o := range opts {
		if o != nil { // a nil Option is ignored, not a panic
			o(&c)
		}
	}
	if c.now == nil { // WithClock(nil): the default, as WithEntropy(nil)
		c.now = time.Now
	}
	// A nil pointer in an interface is not nil: refused here, rather than
	// a panic at the first operation that reads it.
	if c.entropy != nil && nilValue(c.entropy) {
		return c, fmt.Errorf("%w: WithEntropy given a nil %T", ErrInvalidArgument, c.entropy)
	}
	if c.obs.meterProvider != nil && nilValue(c.obs.meterProvider) {
		return c, fmt.Errorf("%w: WithMeterProvider given a nil %T", ErrInvalidArgument, c.obs.meterProvider)
	}
	if c.obs.meterProvider != nil {
		// The observer asks again; an SDK returns the same Meter for the
		// same name.
		if m := c.obs.meterProvider.Meter(instrumentationName); m == nil || nilValue(m) {
			return c, fmt.Errorf("%w: WithMeterProvider given a %T whose Meter returns nil", ErrInvalidArgument, c.obs.meterProvider)
		}
	}
	if err := checkLogger("WithLogger", c.obs.logger); err != nil {
		return c, err
	}
	if c.retention <= 0 {
		return c, fmt.Errorf("%w: journal retention %v must be positive", ErrInvalidArgument, c.retention)
	}
	if c.batchBudget < 1 || c.batchBudget > MaxBatchBudget {
		return c, fmt.Errorf("%w: batch budget %d must be in [1, %d]", ErrInvalidArgument, c.batchBudget, MaxBatchBudget)
	}
	if c.staging != nil {
		if err := c.staging.fill(); err != nil {
			return c, err
		}
	}
	if c.encoding != RawValues && c.encoding != TupleValues {
		return c, fmt.Errorf("%w: unknown value encoding %d", ErrInvalidArgument, c.encoding)
	}
	return c, nil
}

// WithValueEncoding chooses how item bytes are stored: RawValues (the
// default, as the Python recipe) or TupleValues (as the Java recipe).
// The encoding is stored with the queue on first use: a handle with the
// other one fails with ErrConfigMismatch (see Reconfigure).
func WithValueEncoding(e ValueEncoding) Option { return func(c *config) { c.encoding = e } }

// WithVersionstampOrder makes a Queue key its items by the commit's
// versionstamp instead of (last index + 1, random): items are ordered
// strictly by commit, and Enqueue reads nothing of the queue. Trade-offs: the
// layout is not the recipes' (recipe clients cannot share the queue), an
// enqueued item's key is only known after commit, and items enqueued by one
// transaction through different Queue values are ordered randomly among
// themselves. One call enqueues at most 65,536 items, and a read of the
// queue in a transaction that enqueued to it fails with
// ErrUnreadableAfterEnqueue. PriorityQueue rejects this option. The
// layout is stored with the queue on first use; a queue without a stored
// record whose items have the recipe's keys is refused with
// ErrConfigMismatch, as is a handle without this option on a
// versionstamp-ordered queue.
func WithVersionstampOrder() Option { return func(c *config) { c.versionstamps = true } }

// WithoutIdempotency turns the operation journal off: operations behave
// like the FoundationDB recipes, with no journal record to write (one
// write fewer) nor to read on a retry (one point read fewer), and a retry
// after commit_unknown_result may enqueue an item twice or lose a dequeued
// one. Use it only when duplicates and losses are acceptable. WithOpID
// then does nothing (its ID is neither checked nor recorded): an
// operation that failed maybe-committed cannot be settled, and calling it
// again under its ID applies it anew.
func WithoutIdempotency() Option { return func(c *config) { c.noJournal = true } }

// WithJournalRetention sets the journal retention (default
// DefaultJournalRetention): how long after its ID was made an operation
// may still retry or be settled under it; records that nothing cleared
// are kept for twice the retention (below). It must exceed the longest
// time one operation may keep retrying (an operation still retrying after
// its handle's retention fails with ErrOperationExpired), and the time
// within which a caller recovers a maybe-committed Dequeue with WithOpID.
//
// Handles of one queue, in one process or several, may use different
// retentions safely: each declares its retention in the queue (an atomic
// write with its first records), and records are cleared once twice the
// largest retention any handle of the queue ever declared old (within
// another 64th of the expiring handle's retention), whichever handle
// clears them. That largest retention never shrinks, not even with
// Clear: a queue whose handles lower their retention keeps its records
// as long as before. A raise protects records from its declaration on
// only: settle an operation within the retention of the handles of the
// queue when it ran. A handle with a longer retention, first used after
// those records may have expired, can find none for an operation older
// than the old retention, and apply it again.
//
// Clients' clocks may disagree by up to seven eighths of a handle's
// retention (a journal slot's key can be an eighth of it older than the
// operation using it; docs/design.md). A larger skew can let an operation
// that is still retrying apply twice under commit_unknown_result.
func WithJournalRetention(d time.Duration) Option { return func(c *config) { c.retention = d } }

// WithBatchBudget sets the most bytes of transaction size a batch operation
// (EnqueueBatch, PushBatch, DequeueBatch, PopMinBatch, PopMaxBatch, a
// staged fulfilment, JobQueue's AddBatch and Lease) uses, counted as
// FoundationDB counts it: every mutation and every read and write conflict
// range, so that a Set costs about 3 × key + value and a Clear 4 × key.
// Default DefaultBatchBudget, at most MaxBatchBudget, which leaves room
// under FoundationDB's 10,000,000 bytes for the journal's clean-ups and for
// the one item a batch takes even when it alone exceeds the budget.
// EnqueueBatch, PushBatch and AddBatch fail with ErrBatchTooLarge over the
// budget, except for a batch of one item or job, which is always accepted;
// the other batches (Lease too) take fewer items. The budget also bounds the
// bytes of items a batch reads. A DequeueBatch, PopMinBatch or PopMaxBatch
// on a Database whose attempt took more than 2.5 s retries with half the
// budget (down to 100,000 bytes): FoundationDB fails a transaction whose
// read version is 5 s old (transaction_too_old), and a retry at the same
// size would fail the same way.
func WithBatchBudget(bytes int) Option { return func(c *config) { c.batchBudget = bytes } }

// WithEntropy sets the source of the random key suffixes (default, and
// for nil: a ChaCha8 generator seeded from crypto/rand). Deterministic
// tests pass a seeded source. Reads from it are serialised by the queue.
// A nil pointer of a reader type is refused by the constructor with
// ErrInvalidArgument.
func WithEntropy(r io.Reader) Option { return func(c *config) { c.entropy = r } }

// WithClock sets the clock that stamps operation IDs and expires journal
// records (default, and for nil, time.Now). Tests pass a fake clock; in
// production the clocks of all clients of a queue may disagree by less
// than seven eighths of the journal retention (see WithJournalRetention).
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithStaging turns on the staged (high-contention) dequeue: Queue.Dequeue
// and PriorityQueue.PopMin/PopMax, given a Database, file a request when
// they cannot take an item at once, and take the item at their place in
// the line themselves (a Queue made WithVersionstampOrder) or are served in
// batches by the waiting consumers (see StagingConfig.Serving); the Wait
// forms (DequeueWait, PopMinWait, PopMaxWait) become available; Enqueue
// and Push also bump a signal key that wakes waiters. The first staged
// handle stores the serving mode with the queue (see Reconfigure); handles
// made without WithStaging then bump the signal too, and staged handles
// with another serving mode fail with ErrConfigMismatch.
// Zero fields of c take their defaults. The constructor refuses, with
// ErrInvalidArgument and kv.ErrKeyTooLarge, a prefix on which a staged
// request key could exceed the key limit at some registration time (over
// 9,943 bytes for a Queue, 9,941 for a PriorityQueue), rather than let
// staged calls fail or not by the clock. See StagingConfig, and "Staged
// dequeue" in docs/design.md in the repository.
func WithStaging(c StagingConfig) Option {
	return func(cfg *config) { cfg.staging = &c }
}

// suffixSize is the length of the random part of an item key, as in the
// recipes.
const suffixSize = 20

// entropy hands out random suffixes.
type entropy struct {
	mu sync.Mutex
	r  io.Reader
	// own is r when it is the default generator, made here: fill then
	// draws its words directly, without io.ReadFull and Read's buffering
	// (no one else reads it, so which of its bytes a suffix gets is
	// unobservable; a source given WithEntropy is read through Read, as
	// documented).
	own *mrand.ChaCha8
}

func newEntropy(r io.Reader) *entropy {
	if r == nil {
		var seed [32]byte
		_, _ = rand.Read(seed[:])
		own := mrand.NewChaCha8(seed)
		return &entropy{r: own, own: own}
	}
	return &entropy{r: r}
}

func (e *entropy) suffix() ([]byte, error) {
	b := make([]byte, suffixSize)
	if err := e.fill(b); err != nil {
		return nil, err
	}
	return b, nil
}

// suffixKeySize is the length of a packed suffix: the byte string's code,
// its suffixSize bytes (none is 0x00, so none is escaped) and its end.
const suffixKeySize = suffixSize + 2

// appendSuffix appends a random suffix packed as a tuple's byte string
// element, as tuple.Tuple{suffix}.AppendPack would (suffixKeySize bytes).
func (e *entropy) appendSuffix(dst []byte) ([]byte, error) {
	dst = append(dst, 0x01)
	n := len(dst)
	dst = slices.Grow(dst, suffixSize+1)[:n+suffixSize]
	if err := e.fill(dst[n:]); err != nil {
		return nil, err
	}
	return append(dst, 0x00), nil
}

// fill fills b with a random suffix (suffixSize bytes, see suffix).
func (e *entropy) fill(b []byte) error {
	if e.own != nil && len(b) == suffixSize {
		e.fillOwn((*[suffixSize]byte)(b))
		return nil
	}
	e.mu.Lock()
	_, err := io.ReadFull(e.r, b)
	e.mu.Unlock()
	if err != nil {
		return fmt.Errorf("fdbqueue: entropy: %w", err)
	}
	// No 0x00 byte: the tuple encoding escapes each to two bytes, and a
	// suffix of fixed length makes an item key's length, and so a batch's
	// transaction size (budget.go), known before the key is made.
	noZeros(b)
	return nil
}

// fillOwn is fill from the default generator: three words (the last one's
// top half unused), each with its 0x00 bytes made 0x01 as fill does.
func (e *entropy) fillOwn(b *[suffixSize]byte) {
	e.mu.Lock()
	w0, w1, w2 := e.own.Uint64(), e.own.Uint64(), e.own.Uint64()
	e.mu.Unlock()
	binary.LittleEndian.PutUint64(b[0:], w0)
	binary.LittleEndian.PutUint64(b[8:], w1)
	binary.LittleEndian.PutUint32(b[16:], uint32(w2))
	// A word holds a 0x00 byte once in about 32 draws: fix the bytes only
	// then (the unused top half of w2 made non-zero).
	if hasZeroByte(w0) || hasZeroByte(w1) || hasZeroByte(w2|0xffffffff_00000000) {
		noZeros(b[:])
	}
}

// hasZeroByte reports whether one of w's bytes is 0x00 (the classic bit
// trick: a borrow reaches a byte's top bit only through a zero byte).
func hasZeroByte(w uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	return (w-lo)&^w&hi != 0
}

// noZeros makes every 0x00 byte of b 0x01.
func noZeros(b []byte) {
	for i, c := range b {
		if c == 0 {
			b[i] = 1
		}
	}
}

// nilValue reports whether v is nil or holds a nil pointer or func: an
// interface given a typed nil (a `var c *myClock` passed as a Clock),
// whose methods would dereference it.
func nilValue(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func:
		return rv.IsNil()
	}
	return false
}

// checkLogger refuses a non-nil Logger that would panic on its first
// line: one without a handler (a zero slog.Logger) or whose handler is a
// nil pointer. what names the option or field that gave it.
func checkLogger(what string, l *slog.Logger) error {
	if l != nil && nilValue(l.Handler()) {
		return fmt.Errorf("%w: %s given a Logger without a handler", ErrInvalidArgument, what)
	}
	return nil
}

// checkTransactor rejects a nil transactor with a typed error instead of a
// nil-pointer panic.
func checkTransactor[T any](t T) error {
	if any(t) == nil {
		return fmt.Errorf("%w: nil transactor", ErrInvalidArgument)
	}
	if v := reflect.ValueOf(t); v.Kind() == reflect.Pointer && v.IsNil() {
		return fmt.Errorf("%w: nil %T", ErrInvalidArgument, t)
	}
	return nil
}

func valueTooLarge(i, n int) error {
	return fmt.Errorf("%w: item %d is %d bytes stored, limit %d (%w)", ErrValueTooLarge, i, n, kv.MaxValueSize, kv.ErrValueTooLarge)
}
