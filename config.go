package fdbqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Stored configuration.
//
// What a queue is (its key layout, value encoding, kind and staging mode) is
// kept with it, in one record in its meta subspace (prefix + 0xff, then
// ("c",)), as a packed tuple (format, kind, layout, encoding, staging). A
// handle (a Queue, PriorityQueue or JobQueue value) caches the record with
// the metadata version it read it at, which every change of a record bumps
// (write): an operation reads the metadata version and, only when it
// changed, the record, as a snapshot read issued with the operation's own
// reads, so it costs no extra round trip; it parses a record only when its
// bytes differ from the last one parsed. In a transaction that bumped the
// metadata version it reads the record instead (config_bumps.go). When its
// options disagree, the operation fails with a *ConfigMismatchError
// (errors.Is ErrConfigMismatch) before it writes anything.
//
// Every operation of a handle checks, reads and repairs included: the
// writing ones with issueInto and settle; the read-only ones (Peek, Empty,
// Len, Depth, the depth gauges, a JobQueue's Stats and ListDead, Recover's
// first step) through reads (gatedReader, gatedDB), which issue the check
// with the operation's own reads and write nothing, not even a first
// record; Clear and RepairDepth with settleRead in their writing
// transactions, which writes no record either.
//
// A queue without a record is a recipe queue: indexed keys, in the value
// encoding of the handle that uses it first. A JobQueue, whose keys all
// start with a string, is refused on a subspace without a record that holds
// any other key (checkUnrecorded). The first operation that writes (an
// enqueue, push or dequeue of this library, any write of a JobQueue) writes
// the record in its own transaction: a blind write, so concurrent producers
// that write the same record do not conflict. Two first writers with
// different records do conflict: each declares a write conflict on a key
// named by its record and a read conflict on the keys of every other record,
// so one of them retries, reads the record of the other and fails with
// ErrConfigMismatch. Nothing else reads those keys.
//
// A change of the record (Reconfigure, and the first staged consumer or
// WatchForItems on a queue whose record says no one waits) bumps the
// metadata version and adds to an epoch key. An operation on a queue with
// a record conflicts on the metadata version it read (conflictOnChange),
// or on the epoch key where it cannot read the metadata version (after a
// bump in its own transaction) or does not read the record (a staged
// step's blind write, issueStep). Operations in flight across a change
// conflict once and retry under the new record; the first write of the
// record touches neither. The metadata version is the cluster's: a bump
// by any other layer also makes operations in flight conflict once.
//
// Staging: a handle made without WithStaging takes the stored mode: its
// producers bump the signal key when the record says someone waits (a
// staged consumer or WatchForItems), and its consumers, on a queue served
// by place, take only the items after those due to the line. A handle
// made WithStaging must agree with a stored staged mode; on a queue whose
// record says it is not staged it stores its mode (the queue's first
// staged consumer decides the serving mode).

// configFormat is the record's format version. A record of a newer format
// is refused with ErrConfigMismatch.
const configFormat = 1

// Stored staging modes.
const (
	stagingNone    = "none"    // no one waits: producers do not bump
	stagingSignal  = "signal"  // not staged, but WatchForItems waits: producers bump
	stagingBatches = "batches" // staged, served in batches
	stagingPlace   = "place"   // staged, served by place
)

// Stored kinds.
const (
	kindQueue    = "queue"
	kindPriority = "priority queue"
	kindJobs     = "job queue"
)

// jobsLayout is a job queue's stored layout: its jobs are keyed by
// vesting time (it has no other layout), and its counters of jobs by
// vesting time by buckets res wide (JobQueueConfig.StatsResolution, kept
// to the microsecond, as bucketOf uses it), so that no two handles count
// a job in different buckets. For example "vesting, buckets of 1s".
func jobsLayout(res time.Duration) string {
	return jobsLayoutPrefix + time.Duration(res.Microseconds()*1000).String()
}

// jobsLayoutPrefix starts every job queue's stored layout (jobsLayout).
const jobsLayoutPrefix = "vesting, buckets of "

// storedConfig is the record.
type storedConfig struct {
	format   int64
	kind     string // kindQueue, kindPriority or kindJobs
	layout   string // "index" or "versionstamp"; jobsLayout for a job queue
	encoding string // "raw" or "tuple"
	staging  string // one of the staging modes
}

func (c storedConfig) pack() []byte {
	b, _ := tuple.Tuple{c.format, c.kind, c.layout, c.encoding, c.staging}.Pack()
	return b
}

func parseStoredConfig(b []byte) (storedConfig, error) {
	t, err := tuple.Unpack(b)
	if err != nil {
		return storedConfig{}, err
	}
	if len(t) != 5 {
		return storedConfig{}, fmt.Errorf("%d elements, want 5", len(t))
	}
	var c storedConfig
	var ok [5]bool
	c.format, ok[0] = t[0].(int64)
	c.kind, ok[1] = t[1].(string)
	c.layout, ok[2] = t[2].(string)
	c.encoding, ok[3] = t[3].(string)
	c.staging, ok[4] = t[4].(string)
	for i, o := range ok {
		if !o {
			return storedConfig{}, fmt.Errorf("element %d is %T", i, t[i])
		}
	}
	return c, nil
}

// waited reports whether the record says someone waits (producers bump).
func (c storedConfig) waited() bool { return c.staging != stagingNone }

// ConfigMismatchError says how a handle's options disagree with the
// configuration stored with the queue. It matches ErrConfigMismatch with
// errors.Is; get it with errors.As.
type ConfigMismatchError struct {
	Field  string // "format", "record", "kind", "layout", "encoding" or "staging"
	Stored string // the stored value
	Handle string // the handle's value
}

// Error names the field, both values and, where one does, the
// constructor or option that makes a handle agree with the stored value.
func (e *ConfigMismatchError) Error() string {
	msg := fmt.Sprintf("fdbqueue: stored configuration disagrees with the handle's options: %s is %q in the database, %q in the handle", e.Field, e.Stored, e.Handle)
	if h := e.Hint(); h != "" {
		msg += " (" + h + ")"
	}
	return msg
}

// Hint names, in the API's terms, what makes a handle agree with the
// stored value ("open it with NewJobQueue", "pass WithVersionstampOrder"),
// or returns "" where nothing does (a newer format, a corrupt record).
func (e *ConfigMismatchError) Hint() string {
	switch e.Field {
	case "kind":
		switch e.Stored {
		case kindQueue:
			return "open it with NewQueue"
		case kindPriority:
			return "open it with NewPriorityQueue"
		case kindJobs:
			return "open it with NewJobQueue"
		}
	case "layout":
		if w, ok := strings.CutPrefix(e.Stored, jobsLayoutPrefix); ok {
			return "set JobQueueConfig.StatsResolution to " + w
		}
		switch {
		case e.Stored == "versionstamp":
			return "pass WithVersionstampOrder"
		case strings.HasPrefix(e.Stored, "index"):
			return "leave out WithVersionstampOrder"
		}
	case "encoding":
		switch e.Stored {
		case "tuple":
			return "pass WithValueEncoding(TupleValues)"
		case "raw":
			return "leave out WithValueEncoding(TupleValues)"
		}
	case "staging":
		switch e.Stored {
		case stagingPlace:
			return "pass WithStaging with Serving ServeByPlace"
		case stagingBatches:
			return "pass WithStaging with Serving ServeInBatches"
		}
	}
	return ""
}

// Is reports whether target is ErrConfigMismatch.
func (e *ConfigMismatchError) Is(target error) bool { return target == ErrConfigMismatch }

// errConfigMoved makes an operation retry when the stored configuration
// changed under it in a way that changes what it does (a handle made
// without WithStaging that now finds the queue served by place). It is a
// conflict: kv.ErrNotCommitted, retried by Transact and OnError.
var errConfigMoved = fmt.Errorf("fdbqueue: stored configuration changed during the operation: %w", kv.ErrNotCommitted)

// confGate checks a handle's options against the stored record.
type confGate struct {
	key    []byte // the record
	epoch  []byte // written by every change of the record
	claims Subspace
	sig    []byte // the staging signal key
	want   storedConfig
	// staged is the handle's staging mode, "" without WithStaging.
	staged string
	items  kv.KeyRange
	// checkItem tells whether an item key has the handle's layout (used
	// when a versionstamp handle finds items but no record).
	checkItem func([]byte) error
	// foreign are the ranges of the subspace where the handle's kind
	// writes nothing (a JobQueue's): on a queue without a record, a key
	// there is another kind's, and the handle is refused.
	foreign []kv.KeyRange
	seen    atomic.Pointer[storedConfig] // the last record seen; never modified once stored
	// parsed is the last stored record parsed, keyed by its raw bytes: an
	// operation whose record is unchanged compares bytes and parses nothing.
	parsed atomic.Pointer[parsedRecord]
	// agreed is the last parsed record compare accepted: compare depends
	// only on the record and the handle, so it is not run again for it.
	agreed atomic.Pointer[storedConfig]
	// cache is the last record found, with the metadata version read in
	// the same transaction: while the metadata version is unchanged, the
	// record is too, and an operation does not read it (see write).
	cache atomic.Pointer[gateCache]
	// wantRec is want, shared by every operation on a queue without a
	// record (never modified).
	wantRec *storedConfig
	// size is cost(), computed once: it depends only on want and the keys.
	size int
}

// gateCache is a record as of a metadata version (kv.MetadataVersionKey).
type gateCache struct {
	mv  []byte        // never modified
	rec *storedConfig // agreed with the handle; never modified
}

// metadataVersionKey is kv.MetadataVersionKey, read by every operation.
var metadataVersionKey = []byte(kv.MetadataVersionKey)

// parsedRecord is a stored record's raw bytes and what they parse to.
type parsedRecord struct {
	raw []byte
	c   *storedConfig // nil when err is set; never modified
	err error         // the parse error
}

// parse returns the record raw parses to, from the cache when raw is the
// record parsed last. The result is shared: callers copy it to change it.
func (g *confGate) parse(raw []byte) (*storedConfig, error) {
	if p := g.parsed.Load(); p != nil && bytes.Equal(p.raw, raw) {
		return p.c, p.err
	}
	p := &parsedRecord{raw: bytes.Clone(raw)}
	if c, err := parseStoredConfig(raw); err != nil {
		p.err = err
	} else {
		p.c = &c
	}
	g.parsed.Store(p)
	return p.c, p.err
}

func newConfGate(kind string, sub Subspace, items kv.KeyRange, cfg config, staged string, layout string) *confGate {
	meta := metaSubspace(sub.prefix)
	key, _ := meta.Pack(tuple.Tuple{"c"})
	epoch, _ := meta.Pack(tuple.Tuple{"e"})
	claims, _ := meta.Sub("k")
	sig, _ := meta.Pack(tuple.Tuple{"s", "sig"})
	want := storedConfig{format: configFormat, kind: kind, layout: "index", encoding: "raw", staging: stagingNone}
	if cfg.versionstamps {
		want.layout = "versionstamp"
	}
	if layout != "" {
		want.layout = layout
	}
	if cfg.encoding == TupleValues {
		want.encoding = "tuple"
	}
	if staged != "" {
		want.staging = staged
	}
	g := &confGate{key: key, epoch: epoch, claims: claims, sig: sig, want: want, staged: staged, items: items}
	g.wantRec = &g.want
	g.size = g.computeCost()
	return g
}

// initConfig makes q's configuration gate (after initStaging).
func (q *Queue) initConfig() {
	g := newConfGate(kindQueue, q.sub, q.items, q.cfg, stagingMode(q.cfg, q.stage.stable), "")
	g.checkItem = q.checkItemKey
	q.journal.gate = g
}

// initConfig makes pq's configuration gate.
func (pq *PriorityQueue) initConfig() {
	pq.journal.gate = newConfGate(kindPriority, pq.sub, pq.items, pq.cfg, stagingMode(pq.cfg, false), "")
}

// initConfig makes q's configuration gate. A job queue's keys are all
// tuples that start with a string (type code 0x02, FoundationDB's
// design/tuple.md), so the rest of its subspace's range is foreign to it:
// a recipe queue's items start with an integer (its index or priority),
// a versionstamp queue's with a versionstamp (0x33).
func (q *JobQueue) initConfig() {
	g := newConfGate(kindJobs, q.sub, q.items, config{}, "", jobsLayout(q.cfg.StatsResolution))
	p := q.sub.prefix
	at := func(b byte) []byte { return append(bytes.Clone(p), b) }
	g.foreign = []kv.KeyRange{{Begin: at(0x00), End: at(0x02)}, {Begin: at(0x03), End: at(0xff)}}
	q.journal.gate = g
}

// stagingMode names the staging mode of a handle's options ("" without
// WithStaging).
func stagingMode(cfg config, byPlace bool) string {
	switch {
	case cfg.staging == nil:
		return ""
	case byPlace:
		return stagingPlace
	}
	return stagingBatches
}

// servedByPlace reports whether the queue is served by place, by the
// handle's options or, without WithStaging, by the last record seen.
func (g *confGate) servedByPlace(own bool) bool {
	if own {
		return true
	}
	if g.staged != "" {
		return false
	}
	c := g.seen.Load()
	return c != nil && c.staging == stagingPlace
}

// cost bounds what the stored configuration adds to a transaction's size
// (budget.go): the metadata version's read conflict key (or the epoch's,
// in a staged step) always; on the first write or a change, the record,
// the epoch's add, the metadata version's bump, the claim's write conflict
// key and the two read conflict ranges around it.
func (g *confGate) cost() int {
	if g == nil {
		return 0
	}
	return g.size
}

// computeCost is cost's bound, computed once per handle by newConfGate.
func (g *confGate) computeCost() int {
	rec := len(g.want.pack()) + 8 // the staging mode names differ in length
	claim := len(g.claims.prefix) + rec + 4
	around := 2 * (len(g.claims.prefix) + 1 + claim + 1 + keyRangeRefSize)
	mv := len(metadataVersionKey)
	return conflictKeyCost(max(mv, len(g.epoch))) + setCost(len(g.key), rec) + setCost(len(g.epoch), 8) + setCost(mv, 14) +
		conflictKeyCost(claim) + around
}

// gateRead is one transaction's read of the record.
type gateRead struct {
	g *confGate
	// w is the transaction when it is a kv.Transaction (the hot paths
	// give one, and keep it as one: no conversion, no assertion), else
	// nil and tr is it.
	w         kv.Transaction
	tr        kv.ReadTransaction
	mv        kv.FutureValue // the metadata version
	cached    *gateCache     // the cache when issued
	f         kv.FutureValue // the record (nil: not read yet)
	producing bool
	watching  bool // WatchForItems: the record must say someone waits
	readOnly  bool // settleRead: write nothing, even in a writing transaction
	own       bool // the operation's own transaction (see issueInto)
	bumped    bool // the transaction bumped the metadata version: mv was not read
	noCache   bool // the transaction wrote a record: cache nothing
	done      bool
	// issued is the record the handle had seen when the read was issued:
	// a consumer of a handle made without WithStaging chooses the items
	// due to the line (Queue.reserved) after that, by the record seen then.
	issued *storedConfig
}

// issue starts the check of the record in tr: a read of the metadata
// version (kv.MetadataVersionKey, which FoundationDB returns with the read
// version, at no storage read) and, unless the handle has a cached record,
// a snapshot read of the record. With a cached record, the read of the
// metadata version is a normal one, its conflict the one conflictOnChange
// adds; without, both are snapshot reads and settle adds the conflict
// once it has found a record.
// producing
// marks an operation that adds items: it bumps the signal key when the
// record says someone waits and the handle would not.
func (g *confGate) issue(tr kv.ReadTransaction, producing bool) *gateRead {
	if g == nil {
		return nil
	}
	if w, ok := tr.(kv.Transaction); ok {
		return g.issueInto(&gateRead{}, w, producing, false)
	}
	r := &gateRead{g: g, tr: tr, producing: producing}
	r.issueReads(tr)
	return r
}

// issueInto is issue in a writing transaction, into r, which it overwrites
// and returns (the hot paths keep one per operation, see call). own says
// tr is the operation's own transaction (it runs on a Database), in which
// nothing bumped the metadata version before it.
func (g *confGate) issueInto(r *gateRead, tr kv.Transaction, producing, own bool) *gateRead {
	if g == nil {
		return nil
	}
	*r = gateRead{g: g, w: tr, producing: producing, own: own}
	r.issueReads(tr)
	return r
}

// issueReads issues the reads of issue in tr: with a cached record, the
// metadata version with a normal read (its conflict is the one
// conflictOnChange adds); without one, the metadata version and the record
// with snapshot reads.
func (r *gateRead) issueReads(tr kv.ReadTransaction) {
	r.issued = r.g.seen.Load()
	var wrote, bumped bool
	if !r.own {
		wrote, bumped = bumps.lookup(tr)
	}
	switch c := r.g.cache.Load(); {
	case bumped:
		// The transaction bumped the metadata version: a read of it would
		// fail, and fail the commit (config_bumps.go).
		r.bumped, r.f = true, tr.Snapshot().Get(r.g.key)
	case wrote:
		// It wrote a record, which it may never commit: read both, and
		// cache nothing.
		r.noCache = true
		r.mv, r.f = tr.Snapshot().Get(metadataVersionKey), tr.Snapshot().Get(r.g.key)
	case c != nil:
		r.cached, r.mv = c, tr.Get(metadataVersionKey)
	default:
		r.mv, r.f = tr.Snapshot().Get(metadataVersionKey), tr.Snapshot().Get(r.g.key)
	}
}

// rd is the transaction as a ReadTransaction.
func (r *gateRead) rd() kv.ReadTransaction {
	if r.w != nil {
		return r.w
	}
	return r.tr
}

// issueStep is issue for a step of a staged operation. blind says the
// step is likely to read nothing (a registration by place while the line
// is long, a blind write): then, once this handle has seen a record that
// agrees with it, the record is not read, so that the step stays free of
// reads and round trips. The epoch conflict still makes the step fail if
// a change of the record commits meanwhile, and the operation's next step
// reads the record before it takes anything (a request filed under a
// record changed just before is withdrawn then).
func (g *confGate) issueStep(tr kv.Transaction, blind bool) *gateRead {
	if blind && g != nil {
		if c := g.seen.Load(); c != nil && c.staging == g.staged && g.compare(*c) == nil {
			_ = tr.AddReadConflictKey(g.epoch)
			return nil
		}
	}
	// A step's transaction is the staged operation's own: nothing bumped
	// the metadata version in it before this read, so it need not look
	// (bumps.lookup waits for the read version, which would hold up the
	// step's reads until then).
	if g == nil {
		return nil
	}
	return g.issueInto(&gateRead{}, tr, false, true)
}

// settle waits for the record and checks it against the handle (the
// cached record when the metadata version is the one cached with it; after
// a change, a read of the record, one more round trip): on
// disagreement it returns a *ConfigMismatchError and writes nothing. On a
// queue without a record it writes the handle's (in a writing
// transaction); it stores the handle's staging mode on a queue whose record
// says it is not staged; it bumps the signal for a producing operation
// that would not otherwise. A nil gateRead does nothing; a second call
// does nothing.
func (r *gateRead) settle() error {
	if r == nil || r.done {
		return nil
	}
	r.done = true
	g := r.g
	var mv []byte
	var err error
	if !r.bumped {
		mv, err = r.mv.Get()
	}
	unreadable := r.bumped || (err != nil && errors.Is(err, kv.ErrAccessedUnreadable))
	switch {
	case unreadable:
		// The transaction bumped the metadata version before (a record
		// written in it, see config_bumps.go; or another layer's bump, and
		// then FoundationDB fails the commit with the read's error): the
		// record is read as the transaction sees it, and the epoch's
		// conflict stands for the metadata version's.
		if r.w != nil {
			_ = r.w.AddReadConflictKey(g.epoch)
		}
	case err != nil:
		return err
	case r.cached != nil && bytes.Equal(mv, r.cached.mv):
		return r.agree(r.cached.rec)
	}
	if r.f == nil {
		r.f = r.rd().Snapshot().Get(g.key)
	}
	raw, err := r.f.Get()
	if err != nil {
		return err
	}
	if raw == nil {
		tr, writing := r.w, r.w != nil && !r.readOnly
		if err := g.checkUnrecorded(r.rd()); err != nil {
			return err
		}
		c := g.wantRec
		if r.watching && c.staging == stagingNone {
			sig := *c
			sig.staging = stagingSignal
			c = &sig
		}
		g.seen.Store(c)
		if writing {
			// No bump: no handle has this record cached, and a bump would
			// make every operation that found the record conflict with
			// first writers still in flight (producers never conflict).
			g.write(tr, *c, false, false)
		}
		return nil
	}
	stored, err := g.parse(raw)
	if err != nil {
		return &ConfigMismatchError{Field: "record", Stored: fmt.Sprintf("%x (%v)", raw, err), Handle: g.want.String()}
	}
	if stored != g.agreed.Load() {
		if err := g.compare(*stored); err != nil {
			return err
		}
		g.agreed.Store(stored)
	}
	if !unreadable {
		if !r.noCache {
			// Not in a transaction that wrote a record of its own, which
			// may never commit. (The cache does not tell databases apart:
			// a handle used with two databases whose metadata version is
			// the same, say never bumped, trusts the record of the first.)
			g.cache.Store(&gateCache{mv: mv, rec: stored})
		}
		if r.cached == nil {
			r.conflictOnChange()
		}
	}
	return r.agree(stored)
}

// conflictOnChange adds the metadata version's read conflict key: every
// change of the record bumps it (write), so a change that commits while
// the operation runs makes the operation conflict. A queue without a
// record adds none: its first writers conflict only when they disagree
// (write's claims).
func (r *gateRead) conflictOnChange() {
	if r.w != nil {
		_ = r.w.AddReadConflictKey(metadataVersionKey)
	}
}

// agree is settle's end for a record that agrees with the handle.
func (r *gateRead) agree(stored *storedConfig) error {
	g := r.g
	tr, writing := r.w, r.w != nil && !r.readOnly
	// Most operations find the record they saw last: no shared write then
	// (a Swap of the same pointer would bounce its cache line between
	// cores). Either order of two racing operations is a valid one.
	prev := g.seen.Load()
	if prev != stored {
		prev = g.seen.Swap(stored)
	}
	if g.staged != "" && (stored.staging == stagingNone || stored.staging == stagingSignal) {
		// The queue's first staged consumer stores its mode.
		if writing {
			up := *stored
			up.staging = g.staged
			g.seen.Store(&up)
			g.write(tr, up, true, true)
		}
		return nil
	}
	if r.watching && stored.staging == stagingNone && writing {
		up := *stored
		up.staging = stagingSignal
		g.seen.Store(&up)
		g.write(tr, up, true, true)
		return nil
	}
	if g.staged == "" {
		wasPlace := prev != nil && prev.staging == stagingPlace
		// The consumer chose after the read was issued: by r.issued, or
		// by prev if another operation of the handle stored that one
		// meanwhile.
		issuedPlace := r.issued != nil && r.issued.staging == stagingPlace
		isPlace := stored.staging == stagingPlace
		if !r.producing && (wasPlace != isPlace || issuedPlace != isPlace) {
			// A consumer chose which items are due to a line with the
			// old record: retry with the new one.
			return errConfigMoved
		}
		if r.producing && writing && stored.waited() {
			tr.Add(g.sig, one64)
		}
	}
	return nil
}

// compare checks the stored record against the handle's options.
func (g *confGate) compare(s storedConfig) error {
	switch {
	case s.format != configFormat:
		return &ConfigMismatchError{Field: "format", Stored: fmt.Sprint(s.format), Handle: fmt.Sprint(configFormat)}
	case s.kind != g.want.kind:
		return &ConfigMismatchError{Field: "kind", Stored: s.kind, Handle: g.want.kind}
	case s.layout != g.want.layout:
		return &ConfigMismatchError{Field: "layout", Stored: s.layout, Handle: g.want.layout}
	case s.encoding != g.want.encoding:
		return &ConfigMismatchError{Field: "encoding", Stored: s.encoding, Handle: g.want.encoding}
	case g.staged != "" && s.staging != g.staged && (s.staging == stagingBatches || s.staging == stagingPlace):
		return &ConfigMismatchError{Field: "staging", Stored: s.staging, Handle: g.staged}
	}
	return nil
}

// checkUnrecorded refuses a versionstamp handle on a queue without a
// record whose first item has the recipe's indexed layout: a queue without
// a record is a recipe queue. Only then is the items' range read (one
// round trip, once per queue). It refuses a JobQueue on a subspace without
// a record that holds a key in the ranges foreign to it (one round trip,
// until a record is written).
func (g *confGate) checkUnrecorded(tr kv.ReadTransaction) error {
	if g.foreign != nil {
		return g.checkForeign(tr)
	}
	if g.want.layout != "versionstamp" || g.checkItem == nil {
		return nil
	}
	kvs, err := tr.Snapshot().GetRange(g.items, kv.RangeOptions{Limit: 1}).GetSlice()
	if err != nil {
		return err
	}
	if len(kvs) > 0 && g.checkItem(kvs[0].Key) != nil {
		return &ConfigMismatchError{Field: "layout", Stored: "index (no record, recipe items)", Handle: g.want.layout}
	}
	return nil
}

// unrecordedForeign is what a *ConfigMismatchError says is stored when a
// JobQueue finds no record but keys it does not write.
const unrecordedForeign = "none, and keys a job queue does not write (a recipe queue's items)"

// checkForeign refuses the handle when a range foreign to it holds a key
// (the ranges read together, limit 1 each, snapshot reads).
func (g *confGate) checkForeign(tr kv.ReadTransaction) error {
	reads := make([]kv.RangeResult, len(g.foreign))
	for i, r := range g.foreign {
		reads[i] = tr.Snapshot().GetRange(r, kv.RangeOptions{Limit: 1})
	}
	found := false
	for _, rr := range reads {
		kvs, err := rr.GetSlice()
		if err != nil {
			return err
		}
		found = found || len(kvs) > 0
	}
	if found {
		return &ConfigMismatchError{Field: "kind", Stored: unrecordedForeign, Handle: g.want.kind}
	}
	return nil
}

// write stores c as the record. A change (change true) also bumps the
// epoch key, so operations in flight under the old record conflict, and
// with bump the metadata version, so handles read the record again (every
// change bumps; a first write does not, see settle). The claim conflicts
// make first writers of different records conflict with each other, and
// no one else.
func (g *confGate) write(tr kv.Transaction, c storedConfig, change, bump bool) {
	v := c.pack()
	tr.Set(g.key, v)
	if change {
		// Operations in flight under the old record are stale from this
		// commit on. A first write needs no epoch: no operation ran under
		// another record, and first writers that disagree conflict on
		// their claims; those that agree write the same bytes.
		tr.Add(g.epoch, one64)
	}
	if bump {
		kv.BumpMetadataVersion(tr)
	}
	bumps.note(tr, bump)
	claim := g.claimKey(v)
	all, _ := g.claims.Range()
	_ = tr.AddWriteConflictKey(claim)
	_ = tr.AddReadConflictRange(kv.KeyRange{Begin: all.Begin, End: claim})
	_ = tr.AddReadConflictRange(kv.KeyRange{Begin: append(bytes.Clone(claim), 0x00), End: all.End})
}

// claimKey is the key that names record v among the claims: the packed
// record, or, when that is longer than the key limit, the record's 64-bit
// FNV-1a hash. FoundationDB cuts a longer conflict key to 10,001 bytes
// (ReadYourWritesTransaction::addWriteConflictRange and
// ::addReadConflictRange), which empties [claim, claim+\x00) and merges
// claims that differ only further on: first writers of different records
// would not conflict. The hashed claim (at most 9 bytes after the claims'
// prefix) fits on every prefix the queues' other keys fit on, and is never
// the packed record of another (it packs as an integer, a record as
// bytes).
func (g *confGate) claimKey(v []byte) []byte {
	claim, _ := g.claims.Pack(tuple.Tuple{v})
	if len(claim) <= kv.MaxKeySize {
		return claim
	}
	h := fnv.New64a()
	_, _ = h.Write(v)
	claim, _ = g.claims.Pack(tuple.Tuple{h.Sum64()})
	return claim
}

// gatedReader runs read-only functions with a check of the record: the
// read is issued first and checked after fn, so it adds no round trip.
type gatedReader struct {
	t kv.ReadTransactor
	g *confGate
}

func (g *confGate) reads(t kv.ReadTransactor) kv.ReadTransactor {
	if err := checkTransactor(t); err != nil {
		return t // the layer reports the nil transactor
	}
	if db, ok := t.(kv.Database); ok {
		// Still a Database (Len counts a Database in several
		// transactions): each of its read transactions checks.
		return gatedDB{Database: db, r: gatedReader{t: db, g: g}}
	}
	return gatedReader{t: t, g: g}
}

// gatedDB is a Database whose ReadTransact checks the record.
type gatedDB struct {
	kv.Database
	r gatedReader
}

// ReadTransact runs fn in a transaction of the database and checks the
// record read alongside.
func (d gatedDB) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	return d.r.ReadTransact(ctx, fn)
}

// ReadTransact runs fn in t and checks the record read alongside.
func (r gatedReader) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	return r.t.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
		gr := r.g.issue(tr, false)
		err := fn(tr)
		if gerr := gr.settleRead(); gerr != nil {
			return gerr
		}
		return err
	})
}

// settleRead checks the record for a read-only operation: it writes
// nothing (not even a first record), even inside a writing transaction.
func (r *gateRead) settleRead() error {
	if r != nil {
		r.readOnly = true
	}
	return r.settle()
}

// ErrConfigMismatch is returned, before anything is written, by an
// operation whose handle's options (kind, layout, value encoding, staging
// mode) disagree with the configuration stored with the queue. The error
// is a *ConfigMismatchError naming what differs. See Reconfigure.
var ErrConfigMismatch = errors.New("fdbqueue: handle's options disagree with the queue's stored configuration")

// ErrQueueNotEmpty is returned by Reconfigure on a queue that holds items
// or staged requests.
var ErrQueueNotEmpty = errors.New("fdbqueue: queue is not empty")

// reconfigure stores the handle's configuration on an empty queue.
func (g *confGate) reconfigure(ctx context.Context, t kv.Transactor, busy []kv.KeyRange) error {
	if err := checkTransactor(t); err != nil {
		return err
	}
	return t.Transact(ctx, func(tr kv.Transaction) error {
		// The record, with a normal read: a WatchForItems or a first
		// staged consumer storing a waited mode meanwhile conflicts.
		recF := tr.Get(g.key)
		reads := make([]kv.RangeResult, 0, len(busy)+1)
		for _, r := range append([]kv.KeyRange{g.items}, busy...) {
			reads = append(reads, tr.GetRange(r, kv.RangeOptions{Limit: 1}))
		}
		for i, rr := range reads {
			kvs, err := rr.GetSlice()
			if err != nil {
				return err
			}
			if len(kvs) > 0 {
				what := "items"
				if i > 0 {
					what = "staged requests or results"
				}
				return fmt.Errorf("%w: it holds %s; drain it first", ErrQueueNotEmpty, what)
			}
		}
		raw, err := recF.Get()
		if err != nil {
			return err
		}
		c := g.want
		if g.staged == "" && raw != nil {
			// A handle without WithStaging keeps the queue waited on:
			// while the stored mode says someone waits (WatchForItems, or
			// staged consumers), producers bump the signal key, and a
			// watch armed before this call must still fire on the next
			// enqueue. The stored record decides, not this handle's
			// cached copy, which may be stale or missing.
			if old, err := parseStoredConfig(raw); err == nil && old.waited() {
				c.staging = stagingSignal
			}
		}
		g.write(tr, c, true, true)
		g.seen.Store(&c)
		return nil
	})
}

// checkRecover runs a read-only transaction that checks the record before
// Recover: a handle whose options disagree, or one made without
// WithStaging on a staged queue (it would recover as the wrong serving
// mode), gets ErrConfigMismatch.
func (g *confGate) checkRecover(ctx context.Context, db kv.Database) error {
	if err := g.reads(db).ReadTransact(ctx, func(kv.ReadTransaction) error { return nil }); err != nil {
		return err
	}
	if c := g.seen.Load(); g.staged == "" && c != nil && (c.staging == stagingBatches || c.staging == stagingPlace) {
		return &ConfigMismatchError{Field: "staging", Stored: c.staging, Handle: "none (Recover needs the consumers' WithStaging)"}
	}
	return nil
}

// stagingRanges are the ranges of a staged side's requests and results.
func stagingRanges(sub Subspace, names ...string) []kv.KeyRange {
	meta := metaSubspace(sub.prefix)
	var out []kv.KeyRange
	for _, n := range names {
		r, _ := meta.Range("s", n)
		out = append(out, r)
	}
	return out
}

// Reconfigure stores the handle's options as the queue's configuration,
// replacing the stored one: the explicit way to change a queue's layout,
// value encoding or staging mode. It is refused with ErrQueueNotEmpty when
// the queue holds an item or a staged request or result (normal reads, so
// an enqueue committed meanwhile makes it conflict and retry). It also
// bumps the epoch key, so operations of other handles in flight conflict
// once and then fail with ErrConfigMismatch if their options differ. A
// handle without WithStaging keeps a queue that is waited on (the stored
// record says WatchForItems or staged consumers wait) in the signal mode,
// so that a watch armed before still fires on the next enqueue. Cost: the
// record's point read, two range reads (limit 1) and three writes, one
// round trip.
func (q *Queue) Reconfigure(ctx context.Context, t kv.Transactor) error {
	if err := q.usable(); err != nil {
		return err
	}
	return q.journal.gate.reconfigure(ctx, t, stagingRanges(q.sub, "q"))
}

// Reconfigure stores the handle's options as the priority queue's
// configuration; see Queue.Reconfigure. Cost: the record's point read, three
// range reads (limit 1: the items and both ends' staged requests), three
// writes, one round trip.
func (pq *PriorityQueue) Reconfigure(ctx context.Context, t kv.Transactor) error {
	if err := pq.usable(); err != nil {
		return err
	}
	return pq.journal.gate.reconfigure(ctx, t, stagingRanges(pq.sub, "min", "max"))
}

// String is the record in words, for messages and tests.
func (c storedConfig) String() string {
	return strings.Join([]string{fmt.Sprint(c.format), c.kind, c.layout, c.encoding, c.staging}, "/")
}
