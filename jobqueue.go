package fdbqueue

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// JobQueue is a work queue with leases (at-least-once processing), in the
// style of Apple's QuiCK: every job's record is keyed by its vesting time,
// the time from which it may be leased; leasing a job moves its vesting
// time forward by the lease duration, so that it is invisible until the
// lease expires; acknowledging it deletes it. Consumers pick at random
// among the first due jobs so that they rarely contend. Jobs carry an
// optional delay, a priority, a unique key and a maximum number of
// attempts; jobs that exhaust their attempts move to a dead-letter list.
//
// Like Queue, a JobQueue holds no connection: every method takes the
// database or transaction to run in, and composes with the caller's other
// writes when given a Transaction. It is safe for concurrent use. See "Job
// queue with leases" in docs/design.md in the repository for the key
// layout, the cost of each operation and the ordering guarantee. A nil or
// zero JobQueue (not made by NewJobQueue) fails every operation with
// ErrInvalidArgument, touching no database.
type JobQueue struct {
	sub     Subspace
	cfg     JobQueueConfig
	journal *journal
	rand    *entropy
	budget  int
	bounds  jobKeyBounds // the longest key of each kind (jobqueue_budget.go)
	picking picking      // keys Lease calls on this value are taking

	items, dead kv.KeyRange // ("q", ...), ("d", ...)
	signal      []byte      // ("s",): bumped by every write that can make a job due sooner
	total       []byte      // ("c", "n"): jobs in the queue, leased or not
	leased      []byte      // ("c", "l"): jobs holding a lease, live or expired
	deadN       []byte      // ("c", "d"): dead jobs
}

// JobQueueConfig configures a JobQueue. Zero fields take their defaults.
type JobQueueConfig struct {
	// LeaseDuration is the lease duration Lease, LeaseWait and Extend use
	// when given 0 (default DefaultLeaseDuration).
	LeaseDuration time.Duration
	// MaxAttempts is the number of leases a job gets when it was added
	// without its own (default DefaultMaxAttempts). After its last attempt
	// fails (Nack) or expires, the job moves to the dead-letter list.
	MaxAttempts int
	// Choice is K: Lease picks at random among the first K due jobs, so
	// that concurrent consumers rarely pick the same one (default
	// DefaultLeaseChoice). 1 gives strict order (and consumers that
	// contend). Two leases conflict when they pick the same job: about
	// (consumers in other processes)/K of leases conflict, so take K near
	// 8× the consumers for under 0.1 conflicts per lease (calls on one
	// JobQueue value avoid each other's picks). Larger K costs a larger
	// range read per lease (about 100 bytes per candidate).
	Choice int
	// RetryBase and RetryMax shape the default delay before a nacked job is
	// due again: RetryBase·2^(attempt−1), at most RetryMax, of which a
	// uniformly random part up to a half is taken off (jitter). Defaults
	// one second and ten minutes.
	RetryBase, RetryMax time.Duration
	// StatsResolution is the width of the time buckets in which the queue
	// counts jobs by vesting time, so that Stats can split due from delayed
	// jobs without reading them (default one second). Stats is exact up to
	// one bucket: jobs in the bucket that holds "now" count as due.
	// Every client of a queue must use the same value (the fdbqueue
	// command's --stats-resolution too), to the microsecond: the queue
	// stores it with its kind, and a handle with another one fails with
	// ErrConfigMismatch (Field "layout") and writes nothing.
	StatsResolution time.Duration
	// Clock tells the time (default the system clock). All clients of a
	// queue must agree on the time to well within the lease duration. A
	// nil pointer of a Clock type is refused with ErrInvalidArgument.
	Clock Clock
}

// Clock is the time source of a JobQueue: tests pass a fake one that moves
// only when told to, so that nothing sleeps.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has elapsed.
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Defaults of JobQueueConfig.
const (
	DefaultLeaseDuration = 30 * time.Second
	DefaultMaxAttempts   = 10
	DefaultLeaseChoice   = 16
	// MaxLeaseBatch is the most jobs one Lease call takes.
	MaxLeaseBatch = 1000
	// MaxUniqueKeySize is the longest unique key a job may carry, in bytes.
	MaxUniqueKeySize = 1000
	// MaxReasonSize is the longest failure reason kept with a job; longer
	// reasons are cut.
	MaxReasonSize = 1000
)

// NewJobQueue returns a job queue stored in sub (a non-empty prefix, not
// too long for its journal keys: see NewQueue; made WithoutIdempotency,
// not so long that a job's record key could pass the key limit, over
// 9,965 bytes: ErrInvalidArgument and kv.ErrKeyTooLarge). Of
// the Options, WithJournalRetention, WithBatchBudget, WithEntropy,
// WithoutIdempotency, WithLogger, WithMeterProvider and WithQueueName
// apply; WithClock sets the clock when cfg.Clock is nil;
// WithStaging, WithVersionstampOrder and TupleValues are rejected with
// ErrInvalidArgument.
//
// A job queue stores what it is, as a Queue does: its first write stores
// the record (format, "job queue", "vesting, buckets of 1s" with the
// default StatsResolution, "raw", "none") at prefix + 0xff + ("c",), a
// blind write (a job queue without one, made by an earlier version, gets
// it at its next write). Every operation checks it
// with its own reads, at no extra round trip, and fails with
// ErrConfigMismatch (a *ConfigMismatchError whose Field is "kind"),
// writing nothing, on a subspace whose record names a Queue or a
// PriorityQueue, or that has no record but holds keys a job queue does
// not write (a recipe queue's items; while no record is stored, every
// operation spends one more round trip on that check, two range reads);
// and with Field "layout" when the record's StatsResolution
// is not cfg's. A Queue or PriorityQueue on a job queue's subspace fails
// the same way. The rest of JobQueueConfig is neither stored nor checked.
func NewJobQueue(sub Subspace, cfg JobQueueConfig, opts ...Option) (*JobQueue, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(sub.prefix) == 0 {
		return nil, fmt.Errorf("%w: a JobQueue needs a subspace with a non-empty prefix", ErrInvalidArgument)
	}
	if c.staging != nil || c.versionstamps || c.encoding != RawValues {
		return nil, fmt.Errorf("%w: a JobQueue takes neither staging, versionstamp order nor tuple values", ErrInvalidArgument)
	}
	if err := cfg.fill(c); err != nil {
		return nil, err
	}
	c.now = cfg.Clock.Now
	q := &JobQueue{sub: sub, cfg: cfg, journal: newJournal(sub.prefix, c), rand: newEntropy(c.entropy), budget: c.batchBudget}
	if err := q.journal.keysFit(); err != nil {
		return nil, err
	}
	q.items, _ = sub.Range("q")
	q.dead, _ = sub.Range("d")
	q.signal, _ = sub.Pack(tuple.Tuple{"s"})
	q.total, _ = sub.Pack(tuple.Tuple{"c", "n"})
	q.leased, _ = sub.Pack(tuple.Tuple{"c", "l"})
	q.deadN, _ = sub.Pack(tuple.Tuple{"c", "d"})
	q.bounds = q.keyBounds()
	if err := q.keysFit(); err != nil {
		return nil, err
	}
	q.initConfig()
	return q, nil
}

func (c *JobQueueConfig) fill(base config) error {
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Choice == 0 {
		c.Choice = DefaultLeaseChoice
	}
	if c.RetryBase == 0 {
		c.RetryBase = time.Second
	}
	if c.RetryMax == 0 {
		c.RetryMax = 10 * time.Minute
	}
	if c.StatsResolution == 0 {
		c.StatsResolution = time.Second
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
		if base.now != nil {
			c.Clock = funcClock(base.now)
		}
	} else if nilValue(c.Clock) {
		return fmt.Errorf("%w: clock is a nil %T", ErrInvalidArgument, c.Clock)
	}
	switch {
	case c.LeaseDuration < time.Millisecond:
		return fmt.Errorf("%w: lease duration %v, want at least 1ms", ErrInvalidArgument, c.LeaseDuration)
	case c.MaxAttempts < 1:
		return fmt.Errorf("%w: max attempts %d, want at least 1", ErrInvalidArgument, c.MaxAttempts)
	case c.Choice < 1 || c.Choice > MaxLeaseBatch:
		return fmt.Errorf("%w: lease choice %d, want 1 to %d", ErrInvalidArgument, c.Choice, MaxLeaseBatch)
	case c.RetryBase < 0 || c.RetryMax < c.RetryBase:
		return fmt.Errorf("%w: retry delays base %v, max %v", ErrInvalidArgument, c.RetryBase, c.RetryMax)
	case c.StatsResolution < time.Millisecond:
		return fmt.Errorf("%w: stats resolution %v, want at least 1ms", ErrInvalidArgument, c.StatsResolution)
	}
	return nil
}

// funcClock is a Clock from a Now function (WithClock) with real timers.
type funcClock func() time.Time

func (f funcClock) Now() time.Time                         { return f() }
func (f funcClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Subspace returns the queue's subspace.
func (q *JobQueue) Subspace() Subspace {
	if q == nil {
		return Subspace{}
	}
	return q.sub
}

// JobID identifies a job for its whole life: leases, retries, dead letter
// and requeue.
type JobID [16]byte

// String returns the ID in hex.
func (id JobID) String() string { return hex.EncodeToString(id[:]) }

// Bytes returns a copy of the ID's 16 bytes. A JobID held in a field or
// returned by a call is not addressable, so id[:] does not compile on it
// (task.Lease().JobID[:]): use id.Bytes().
func (id JobID) Bytes() []byte { return append([]byte(nil), id[:]...) }

// Job describes a job to add.
type Job struct {
	// Value is the job's payload, stored as is (at most 100,000 bytes) and
	// never rewritten: leases, retries and dead-lettering move only the
	// job's small record.
	Value []byte
	// Delay makes the job due Delay after it is added. RunAt, if not zero,
	// makes it due at RunAt instead (a past RunAt is due at once, and
	// ordered by that time). Vesting times are kept in Unix microseconds,
	// a future one rounded up (never due early); a RunAt outside what an
	// int64 of them holds (before time.UnixMicro(math.MinInt64) or after
	// time.UnixMicro(math.MaxInt64), years −290,308 and 294,247) fails
	// with ErrInvalidArgument.
	Delay time.Duration
	RunAt time.Time
	// Priority orders jobs with the same vesting time: higher first.
	Priority int32
	// UniqueKey, if not empty (at most MaxUniqueKeySize bytes), makes the
	// add a no-op while a job with the same key is in the queue (due,
	// delayed or leased); the key is free again once that job is acked,
	// cancelled or dead-lettered.
	UniqueKey string
	// MaxAttempts overrides the queue's default when positive; 0 takes
	// the default, and a negative value fails with ErrInvalidArgument.
	MaxAttempts int
}

// The earliest and latest RunAt a Job may carry: the Unix-microsecond
// range of an int64, in which the queue keys vesting times (beyond it,
// time.Time.UnixMicro wraps around).
var (
	minRunAt = time.UnixMicro(math.MinInt64)
	maxRunAt = time.UnixMicro(math.MaxInt64)
)

// AddResult says what Add did with one job.
type AddResult struct {
	// ID is the new job's ID, or, for a duplicate, the ID of the job in
	// the queue that holds the unique key.
	ID JobID
	// Duplicate reports that a job with the same unique key was in the
	// queue, so nothing was added.
	Duplicate bool
}

// Add adds one job; see AddBatch.
func (q *JobQueue) Add(ctx context.Context, t kv.Transactor, job Job, opts ...OpOption) (AddResult, error) {
	r, err := q.AddBatch(ctx, t, []Job{job}, opts...)
	if err != nil {
		return AddResult{}, err
	}
	return r[0], nil
}

// AddBatch adds jobs in one transaction, all or none, and returns one
// result per job, in order. A job whose unique key is held by a job in the
// queue (or by an earlier job of the batch) is not added and its result
// says Duplicate.
//
// Conflicts: none with other producers or consumers, except that adds of
// the same unique key conflict (each reads the key), so that exactly one of
// them adds its job. Cost: one round trip (the journal, on a retry, and
// every unique key are read together; none on a first attempt without
// unique keys), then per job four writes (value, record, ID index, unique
// key if any), two atomic adds to counters and a journal record, plus one
// atomic add to the signal key that wakes LeaseWait.
//
// Exactly once: under commit_unknown_result the retry finds the journal
// record and returns the first attempt's results. Inside your own
// transaction pass WithOpID (see the package documentation, "Exactly once").
// A value over 100,000 bytes fails with ErrValueTooLarge, a batch of several
// jobs over the budget with ErrBatchTooLarge (a single job is always
// accepted), and a bad field with ErrInvalidArgument, before anything is
// written; so does, with kv.ErrKeyTooLarge too, a unique key whose key
// ("u", unique key) on a long prefix would pass the 10,000-byte key limit
// (each 0x00 byte packs as two). An empty batch does nothing.
//
// Budget (WithBatchBudget): the batch's transaction size as FoundationDB
// counts it (mutations and conflict ranges, see budget.go) is about
// value + 5 × unique key + 15 × subspace prefix + 1,200 bytes per job, so
// with a short prefix the default 1 MB budget takes about 700 jobs with
// small values and the largest (MaxBatchBudget) about 6,300.
func (q *JobQueue) AddBatch(ctx context.Context, t kv.Transactor, jobs []Job, opts ...OpOption) ([]AddResult, error) {
	if err := q.usable(); err != nil {
		return nil, err
	}
	if err := checkTransactor(t); err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	for i, j := range jobs {
		if err := q.checkJob(i, j); err != nil {
			return nil, err
		}
	}
	t = q.journal.track.observe("add", t)
	o := q.journal.begin(t, opts)
	// One job is always accepted, as a Lease always takes one: it fits the
	// room MaxBatchBudget leaves under the transaction limit.
	if size := q.addBatchCost(o, jobs); size > q.budget && len(jobs) > 1 {
		err := fmt.Errorf("%w: %d jobs, %d bytes as FoundationDB counts them, budget %d", ErrBatchTooLarge, len(jobs), size, q.budget)
		o.end(err) // hand back the cleanups it took
		return nil, err
	}
	var gate gateRead
	res, err := kv.Transact(ctx, t, func(tr kv.Transaction) ([]AddResult, error) {
		o.gate = q.journal.gate.issueInto(&gate, tr, false, o.owned) // config.go
		rec, err := o.check(tr)
		if err != nil {
			return nil, err
		}
		held := make([]kv.FutureValue, len(jobs))
		for i, j := range jobs {
			if j.UniqueKey != "" {
				held[i] = tr.Get(q.key("u", []byte(j.UniqueKey)))
			}
		}
		if prev, done, err := o.applied(rec); err != nil || done {
			if err != nil {
				return nil, err
			}
			return decodeAddResults(prev, len(jobs))
		}
		now := q.cfg.Clock.Now()
		out := make([]AddResult, len(jobs))
		records := make([][]byte, len(jobs))
		inBatch := map[string]JobID{}
		for i, j := range jobs {
			if j.UniqueKey != "" {
				owner, err := held[i].Get()
				if err != nil {
					return nil, err
				}
				if id, ok := inBatch[j.UniqueKey]; ok {
					out[i] = AddResult{ID: id, Duplicate: true}
				} else if owner != nil {
					copy(out[i].ID[:], owner)
					out[i].Duplicate = true
				}
			}
			if !out[i].Duplicate {
				if out[i].ID, err = q.newID(); err != nil {
					return nil, err
				}
				if j.UniqueKey != "" {
					inBatch[j.UniqueKey] = out[i].ID
				}
				q.writeNew(tr, out[i].ID, j, now)
			}
			records[i], _ = tuple.Tuple{out[i].ID[:], out[i].Duplicate}.Pack()
		}
		tr.Add(q.signal, one)
		o.record(tr, records...)
		return out, nil
	})
	o.end(err)
	return res, o.unknownResult(err)
}

// checkJob checks the fields of job i of a batch before anything is
// written (AddBatch, Schedule).
func (q *JobQueue) checkJob(i int, j Job) error {
	if len(j.Value) > kv.MaxValueSize {
		return valueTooLarge(i, len(j.Value))
	}
	if len(j.UniqueKey) > MaxUniqueKeySize {
		return fmt.Errorf("%w: job %d: unique key of %d bytes, limit %d", ErrInvalidArgument, i, len(j.UniqueKey), MaxUniqueKeySize)
	}
	if n := len(q.key("u", []byte(j.UniqueKey))); n > kv.MaxKeySize {
		return fmt.Errorf("%w: job %d: unique key of %d bytes makes a %d-byte key on this subspace, over the %d-byte key limit (%w)",
			ErrInvalidArgument, i, len(j.UniqueKey), n, kv.MaxKeySize, kv.ErrKeyTooLarge)
	}
	if j.MaxAttempts < 0 {
		return fmt.Errorf("%w: job %d: max attempts %d", ErrInvalidArgument, i, j.MaxAttempts)
	}
	if !j.RunAt.IsZero() && (j.RunAt.Before(minRunAt) || j.RunAt.After(maxRunAt)) {
		return fmt.Errorf("%w: job %d: run-at time %v outside %v to %v", ErrInvalidArgument, i, j.RunAt, minRunAt, maxRunAt)
	}
	return nil
}

func decodeAddResults(prev [][]byte, n int) ([]AddResult, error) {
	if len(prev) != n {
		return nil, fmt.Errorf("%w: journal holds %d add results, want %d", ErrForeignKey, len(prev), n)
	}
	out := make([]AddResult, n)
	for i, p := range prev {
		t, err := tuple.Unpack(p)
		if err != nil || len(t) != 2 {
			return nil, fmt.Errorf("%w: bad add record", ErrForeignKey)
		}
		id, ok1 := t[0].([]byte)
		dup, ok2 := t[1].(bool)
		if !ok1 || !ok2 || len(id) != len(JobID{}) {
			return nil, fmt.Errorf("%w: bad add record", ErrForeignKey)
		}
		copy(out[i].ID[:], id)
		out[i].Duplicate = dup
	}
	return out, nil
}

func (q *JobQueue) newID() (JobID, error) {
	var id JobID
	s, err := q.rand.suffix()
	if err != nil {
		return id, err
	}
	copy(id[:], s)
	return id, nil
}

// writeNew writes a new job's value, record, index and unique key.
func (q *JobQueue) writeNew(tr kv.Transaction, id JobID, j Job, now time.Time) {
	vest := now.Add(max(j.Delay, 0))
	if !j.RunAt.IsZero() {
		vest = j.RunAt
	}
	q.writeNewAt(tr, id, j, now, vestMicros(vest, now))
}

// writeNewAt is writeNew of a job due at vest (Unix µs), whatever its
// Delay and RunAt: Schedule's, whose slot may start at the zero time.
func (q *JobQueue) writeNewAt(tr kv.Transaction, id JobID, j Job, now time.Time, vest int64) {
	m := jobMeta{
		id:          id,
		vest:        vest,
		prio:        j.Priority,
		maxAttempts: j.MaxAttempts,
		unique:      []byte(j.UniqueKey),
		added:       now.UnixMicro(),
	}
	if m.maxAttempts == 0 {
		m.maxAttempts = q.cfg.MaxAttempts
	}
	value := j.Value
	if value == nil {
		value = []byte{}
	}
	tr.Set(q.key("v", id[:]), value)
	if len(m.unique) > 0 {
		tr.Set(q.key("u", m.unique), id[:])
	}
	q.put(tr, m)
	tr.Add(q.total, one)
	q.bucket(tr, "p", m.vest, 1)
}

// vestMicros returns the vesting time, in the Unix microseconds the keys
// hold, of a job due at t: rounded up when t is in the future, so that a
// job is never due before its time (truncating would make a job due up to
// a microsecond early), and down otherwise, so that a job due now is due
// at once. t must lie within minRunAt..maxRunAt.
func vestMicros(t, now time.Time) int64 {
	us := t.UnixMicro()
	if t.After(now) && t.After(time.UnixMicro(us)) {
		us++
	}
	return us
}

// jobMeta is a job's record: everything but its value. It is stored at the
// job's queue key ("q", vest, -priority, id) or, once dead, at its dead key
// ("d", deadAt, id); ("x", id) holds that key.
type jobMeta struct {
	id          JobID
	vest        int64  // vesting time, Unix µs (for a leased job, its deadline)
	prio        int32  // priority: higher first
	lease       []byte // the current lease's ID; nil when not leased
	attempts    int    // leases taken so far
	maxAttempts int
	unique      []byte
	added       int64  // when it was added (or requeued), Unix µs
	deadAt      int64  // when it died, Unix µs; 0 while alive
	reason      []byte // the last failure's reason
}

func (m jobMeta) queueKey(q *JobQueue) []byte {
	return q.key("q", m.vest, -int64(m.prio), m.id[:])
}

func (m jobMeta) deadKey(q *JobQueue) []byte { return q.key("d", m.deadAt, m.id[:]) }

func (m jobMeta) encode() []byte {
	var lease, unique any
	if m.lease != nil {
		lease = m.lease
	}
	if len(m.unique) > 0 {
		unique = m.unique
	}
	b, _ := tuple.Tuple{m.vest, int64(m.prio), lease, int64(m.attempts), int64(m.maxAttempts), unique, m.added, m.deadAt, m.reason}.Pack()
	return b
}

func decodeMeta(key, value []byte, id JobID) (jobMeta, error) {
	bad := func(why string) (jobMeta, error) {
		return jobMeta{}, &ForeignKeyError{Key: bytes.Clone(key), Reason: "job record: " + why}
	}
	t, err := tuple.Unpack(value)
	if err != nil {
		return bad(err.Error())
	}
	if len(t) != 9 {
		return bad(fmt.Sprintf("%d fields, want 9", len(t)))
	}
	m := jobMeta{id: id}
	ints := make([]int64, 0, 6)
	for _, i := range []int{0, 1, 3, 4, 6, 7} {
		v, ok := t[i].(int64)
		if !ok {
			return bad(fmt.Sprintf("field %d is %T, want an integer", i, t[i]))
		}
		ints = append(ints, v)
	}
	m.vest, m.attempts, m.maxAttempts, m.added, m.deadAt = ints[0], int(ints[2]), int(ints[3]), ints[4], ints[5]
	m.prio = int32(ints[1])
	var ok bool
	if t[2] != nil {
		if m.lease, ok = t[2].([]byte); !ok {
			return bad("lease ID is not bytes")
		}
	}
	if t[5] != nil {
		if m.unique, ok = t[5].([]byte); !ok {
			return bad("unique key is not bytes")
		}
	}
	if m.reason, ok = t[8].([]byte); !ok {
		return bad("reason is not bytes")
	}
	return m, nil
}

// parseItemKey returns the ID in a key of the "q" range.
func (q *JobQueue) parseItemKey(key []byte) (vest int64, id JobID, err error) {
	t, err := q.sub.Unpack(key)
	if err == nil && len(t) == 4 {
		v, ok1 := t[1].(int64)
		_, ok2 := t[2].(int64)
		b, ok3 := t[3].([]byte)
		if ok1 && ok2 && ok3 && len(b) == len(id) {
			copy(id[:], b)
			return v, id, nil
		}
	}
	return 0, id, &ForeignKeyError{Key: bytes.Clone(key), Reason: "want (\"q\", vesting time, -priority, 16-byte job ID)"}
}

// put writes m at its queue key and points the ID index at it.
func (q *JobQueue) put(tr kv.Transaction, m jobMeta) {
	k := m.queueKey(q)
	tr.Set(k, m.encode())
	tr.Set(q.key("x", m.id[:]), k)
}

func (q *JobQueue) key(elems ...any) []byte {
	k, err := q.sub.Pack(tuple.Tuple(elems))
	if err != nil {
		panic("fdbqueue: packing a job queue key: " + err.Error()) // only fixed element types reach here
	}
	return k
}

var (
	one      = le64(1)
	minusOne = le64(-1)
	zero8    = le64(0)
)

func le64(v int64) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, uint64(v))
	return b
}

// bucket adds delta to the count of jobs whose vesting time falls in the
// bucket of vest, in the pending ("p") or leased ("e") series, and clears
// the counter when it reaches zero (so only buckets holding jobs exist).
// Atomic operations: no conflicts.
func (q *JobQueue) bucket(tr kv.Transaction, series string, vest int64, delta int64) {
	k := q.key("c", series, q.bucketOf(vest))
	tr.Add(k, le64(delta))
	if delta < 0 {
		tr.CompareAndClear(k, zero8)
	}
}

func (q *JobQueue) bucketOf(micros int64) int64 {
	res := q.cfg.StatsResolution.Microseconds()
	b := micros / res
	if micros < 0 && micros%res != 0 {
		b--
	}
	return b
}
