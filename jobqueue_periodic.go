package fdbqueue

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Limits of a PeriodicJob.
const (
	// MinPeriod is the shortest period a PeriodicJob may have. Each slot
	// costs every scheduler one transaction per schedule, and the
	// schedulers of a schedule all read and write its one marker key, so
	// they conflict once per slot: below a second that hot key, and clocks
	// that disagree by more than a period (JobQueueConfig.Clock), make
	// slots a matter of which scheduler looks first. Work due more often
	// than once a second is a loop in a worker, not a schedule.
	MinPeriod = time.Second
	// MaxScheduleNameSize is the longest PeriodicJob.Name, in bytes.
	MaxScheduleNameSize = 1000
)

// PeriodicJob is a schedule: a job added once per period, for JobQueue's
// Schedule and RunScheduler (river's PeriodicJobs, asynq's Scheduler).
type PeriodicJob struct {
	// Name identifies the schedule in the queue (not empty, at most
	// MaxScheduleNameSize bytes): every scheduler of one schedule uses the
	// same name, and two schedules of one queue must not share one.
	Name string
	// Every is the period: at least MinPeriod, a whole number of
	// microseconds. Slots are aligned to the Unix epoch: the slot of a
	// time t is t truncated to a multiple of Every since 1970-01-01 UTC
	// (with Every = time.Hour, on the hour).
	Every time.Duration
	// Job returns the job to add for the slot that starts at slot. Its
	// RunAt is replaced by slot and its Delay ignored: the job is due at
	// the slot's start. The other fields are Add's (a UniqueKey held by a
	// job in the queue skips the slot, see ScheduleResult.Duplicate).
	// Required.
	Job func(slot time.Time) Job
}

// ScheduleResult says what Schedule did.
type ScheduleResult struct {
	// Slot is the slot Schedule was called for: the start of the period
	// that holds its now, in now's location.
	Slot time.Time
	// Added reports that this call added the slot's job (on a Database,
	// also when a commit whose result was unknown added it, see Schedule).
	Added bool
	// ID is the slot's job: the one this call added, or, when Added is
	// false and the slot was already scheduled, the one that was added for
	// it (or that held the unique key, Duplicate). Zero when a later slot
	// than Slot was already scheduled (Ahead).
	ID JobID
	// Duplicate reports that the slot was skipped because the job's
	// UniqueKey was held by a job in the queue (ID is that job): the slot
	// counts as scheduled all the same.
	Duplicate bool
	// Ahead is, when a later slot than Slot was already scheduled, that
	// slot, the marker's (in now's location); zero otherwise. The
	// schedule adds nothing until now reaches the slot after it: see
	// Schedule for a marker far ahead.
	Ahead time.Time
}

// periodic is a schedule as Schedule and RunScheduler run it: a
// PeriodicJob, or a TypedPeriodicJob whose job function encodes the
// slot's value and fails when its codec does.
type periodic struct {
	Name  string
	Every time.Duration
	job   func(slot time.Time) (Job, error) // nil when the Job function is
}

// periodic returns pj as Schedule runs it.
func (pj PeriodicJob) periodic() periodic {
	p := periodic{Name: pj.Name, Every: pj.Every}
	if pj.Job != nil {
		p.job = func(slot time.Time) (Job, error) { return pj.Job(slot), nil }
	}
	return p
}

// checkPeriodic checks pj's fields and that its marker key fits.
func (q *JobQueue) checkPeriodic(pj periodic) error {
	if err := q.checkScheduleName(pj.Name, false); err != nil {
		return err
	}
	switch {
	case pj.Every < MinPeriod:
		return fmt.Errorf("%w: periodic job %q: period %v, want at least %v", ErrInvalidArgument, pj.Name, pj.Every, MinPeriod)
	case pj.Every%time.Microsecond != 0:
		return fmt.Errorf("%w: periodic job %q: period %v is not a whole number of microseconds", ErrInvalidArgument, pj.Name, pj.Every)
	case pj.job == nil:
		return fmt.Errorf("%w: periodic job %q: nil Job function", ErrInvalidArgument, pj.Name)
	}
	return nil
}

// slotOf returns the start of the slot of every that holds t, in Unix
// microseconds (floor division: before 1970 too), and false when that
// start is before the earliest time an int64 of them holds: in the first
// period of that range, where the start, computed in int64, would wrap
// around to a time near its end.
func slotOf(t time.Time, every time.Duration) (int64, bool) {
	us, p := t.UnixMicro(), every.Microseconds()
	r := us % p
	if r < 0 {
		r += p
	}
	if us < math.MinInt64+r {
		return 0, false
	}
	return us - r, true
}

// Schedule adds pj's job for the slot that holds now (the queue's Clock
// when now is zero), unless that slot or a later one is already
// scheduled: in one transaction it reads the schedule's marker, the key
// ("p", Name) in the queue's subspace that holds the last scheduled slot,
// and, when now's slot is later, adds the job, due at the slot's start,
// and writes the marker. It never adds the slots between the marker and
// now's: a schedule whose schedulers were all down for several periods
// gets one job, for the latest slot, not a burst (as river's and asynq's
// schedulers do). A now in an earlier slot than the marker's (a scheduler
// whose clock lags) adds nothing, and says so: ScheduleResult.Ahead holds
// the marker's slot, and the queue's metric fdbqueue.schedule.ahead counts
// the call. So a marker written by a clock far ahead (or a now given far
// ahead) stops the schedule until the clocks reach it: RunScheduler logs
// it at Warn, and Schedules shows the slot. Either wait, or fix or stop
// the schedulers whose clock is ahead (else they write it again) and
// Unschedule the name: the next Schedule adds the slot under way. A
// schedule's first call, or one after a gap or an Unschedule, adds the
// slot under way (after an Unschedule, unless that slot's job is still in
// the queue: see below): its job is due at once (its due time, the
// slot's start, has passed), not at the next slot. The marker stays when no
// process runs the schedule any more: Unschedule removes it.
//
// A marker whose first three fields this version cannot read (corrupt, or
// written by another program) fails the call with a *ForeignKeyError
// (ErrForeignKey) naming its key, adding nothing: Schedule does not
// overwrite it, as it cannot tell which slot was last scheduled. Schedules
// lists such a marker (ScheduleInfo.Err, Raw) and Unschedule removes it;
// the next Schedule then starts afresh, with the slot under way.
//
// Exactly once per slot, across any number of schedulers: the marker read
// is a normal read, so of two Schedules of one slot that overlap, the
// second to commit conflicts, and its retry finds the marker and adds
// nothing. A unique key alone would not do: it is freed when the job is
// acked, and a slow scheduler could add the slot again.
//
// The slot's job can also be found without the marker: its ID is not
// wholly random, its first 12 bytes are derived from Name and the slot
// (SHA-256; the last 4 are random), and each attempt reads the ID index
// entries of that prefix too (a snapshot read). So when the marker is gone
// (an Unschedule of the name removed it) or holds an earlier slot, a job
// of now's slot still in the queue (queued, leased or dead) makes Schedule
// add nothing: it returns that job's ID, Added false, and writes nothing,
// the marker neither. Only a slot whose job has left the queue (acked,
// cancelled, deleted) and whose marker was removed is added again.
//
// Under commit_unknown_result, on a Database, the retry finds the marker
// naming the job ID this call chose, so it returns Added true and that
// ID, and adds nothing more: the marker makes Schedule idempotent without
// the journal. A retry that finds another marker still finds its own job:
// in the queue by its ID, or, when it was removed meanwhile and another
// scheduler moved the marker on to a later slot, named in that marker as
// the one it replaced; it returns Added true and that ID, writing
// nothing. When the job was removed and the marker too (an Unschedule),
// nothing shows the slot was added: the retry adds it again, under a new
// ID. When the job was removed and the marker moved on twice (or after an
// Unschedule), the retry adds nothing and returns Added false, with the
// marker's slot in Ahead, for a slot it did add. Inside your own
// transaction your retry calls Schedule again, which chooses another ID:
// when the first commit landed, it finds the marker, or without it the
// slot's job by its ID, and returns Added false with that job (compare IDs
// to tell), adding nothing; only if that job was also removed, and the
// marker with it, does it add the slot's job a second time.
//
// Conflicts: with other Schedules and Unschedules of the same Name only
// (the job's writes are Add's, which conflict with nothing but Adds of
// the same unique key; the slot's ID index entries are a snapshot read).
// Cost: one round trip (the marker, the slot's ID index entries, one
// range read that finds none or the slot's one job, and the job's unique
// key if it has one, read together), then, when it adds, Add's writes for
// one job (value, record, ID index, unique key if any, two counter adds,
// the signal bump) and the marker; nothing when the slot is scheduled.
//
// A bad pj (empty or long Name, a period under MinPeriod or not a whole
// number of microseconds, a nil Job function) or a bad job from pj.Job
// fails with ErrInvalidArgument (ErrValueTooLarge for a value over
// 100,000 bytes) before anything is written; so does a now outside the
// Unix microseconds of an int64 (Job.RunAt's range) or in the first
// period of that range, whose slot would start before it. pj.Job is
// called once per call, before the transaction.
func (q *JobQueue) Schedule(ctx context.Context, t kv.Transactor, pj PeriodicJob, now time.Time) (ScheduleResult, error) {
	return q.schedule(ctx, t, pj.periodic(), now)
}

// schedule is Schedule of pj, whose job function may fail: then it returns
// that error and writes nothing.
func (q *JobQueue) schedule(ctx context.Context, t kv.Transactor, pj periodic, now time.Time) (ScheduleResult, error) {
	if err := q.usable(); err != nil {
		return ScheduleResult{}, err
	}
	if err := checkTransactor(t); err != nil {
		return ScheduleResult{}, err
	}
	if err := q.checkPeriodic(pj); err != nil {
		return ScheduleResult{}, err
	}
	if now.IsZero() {
		now = q.cfg.Clock.Now()
	}
	if now.Before(minRunAt) || now.After(maxRunAt) {
		return ScheduleResult{}, fmt.Errorf("%w: periodic job %q: time %v outside %v to %v", ErrInvalidArgument, pj.Name, now, minRunAt, maxRunAt)
	}
	slot, ok := slotOf(now, pj.Every)
	if !ok {
		return ScheduleResult{}, fmt.Errorf("%w: periodic job %q: the slot of %v starts before %v", ErrInvalidArgument, pj.Name, now, minRunAt)
	}
	res := ScheduleResult{Slot: time.UnixMicro(slot).In(now.Location())}
	job, err := pj.job(res.Slot)
	if err != nil {
		return ScheduleResult{}, err
	}
	job.RunAt, job.Delay = res.Slot, 0
	if err := q.checkJob(0, job); err != nil {
		return ScheduleResult{}, fmt.Errorf("periodic job %q: %w", pj.Name, err)
	}
	tag := slotTag(pj.Name, slot)
	id, err := q.slotID(tag) // the first attempt's: the marker names it
	if err != nil {
		return ScheduleResult{}, err
	}
	marker := q.key("p", pj.Name)
	slotJobs := q.slotJobs(tag)
	t = q.journal.track.observe("schedule", t) // its conflicts and retries
	_, own := t.(kv.Database)
	var gate gateRead
	// The IDs the attempts chose: on a Database, an attempt after one
	// whose commit's outcome was unknown looks for their jobs (see
	// Schedule).
	var tried []JobID
	return kv.Transact(ctx, t, func(tr kv.Transaction) (ScheduleResult, error) {
		g := q.journal.gate.issueInto(&gate, tr, false, own) // config.go
		mf := tr.Get(marker)                                 // normal read: concurrent schedulers conflict
		var held kv.FutureValue
		if job.UniqueKey != "" {
			held = tr.Get(q.key("u", []byte(job.UniqueKey)))
		}
		// The jobs of this slot in the queue, by their IDs' slot tag. A
		// snapshot read: a job of the slot is added only with the marker,
		// which conflicts, and a job of the slot removed meanwhile changes
		// nothing this attempt writes.
		sf := tr.Snapshot().GetRange(slotJobs, kv.RangeOptions{})
		if err := g.settle(); err != nil { // before any write
			return ScheduleResult{}, err
		}
		raw, err := mf.Get()
		if err != nil {
			return ScheduleResult{}, err
		}
		found, err := sf.GetSlice()
		if err != nil {
			return ScheduleResult{}, err
		}
		out := res
		var other JobID // a job of the slot that no attempt of this call chose
		for _, p := range found {
			fid, ok := q.indexedID(p.Key)
			switch {
			case !ok: // not an ID index entry: no job
			case slices.Contains(tried, fid):
				// An earlier attempt's job is in the queue: that commit
				// landed, whatever became of the marker since (an
				// Unschedule removed it, another scheduler moved it on).
				out.ID, out.Added = fid, true
				return out, nil
			case other == JobID{}:
				other = fid
			}
		}
		if len(tried) > 0 {
			// No earlier attempt's job is in the queue: none landed, or
			// one did and its job was removed since. A fresh ID, so that
			// no ID names two jobs.
			if id, err = q.slotID(tag); err != nil {
				return ScheduleResult{}, err
			}
		}
		tried = append(tried, id)
		var prev JobID // the job the marker names, written as the new marker's previous
		if raw != nil {
			m, err := parseMarker(marker, raw)
			if err != nil {
				return ScheduleResult{}, err
			}
			switch {
			case m.slot > slot && slices.Contains(tried, m.prev):
				// This call's earlier commit landed and another scheduler
				// moved the marker on since; its job is gone (acked,
				// cancelled or deleted), or it would have been found.
				out.ID, out.Added = m.prev, true
				return out, nil
			case m.slot > slot:
				out.Ahead = time.UnixMicro(m.slot).In(now.Location())
				q.journal.track.obs.markerAhead(tr)
				return out, nil
			case m.slot == slot:
				out.ID, out.Duplicate = m.id, m.dup
				out.Added = !m.dup && slices.Contains(tried, m.id) // this call's earlier commit
				return out, nil
			}
			prev = m.id
		}
		if other != (JobID{}) {
			// The slot's job is in the queue, but the marker does not say
			// so: an Unschedule removed it after that job was added (a
			// scheduler that lags may have written an earlier slot
			// since). The slot is scheduled: add nothing, write nothing.
			out.ID = other
			return out, nil
		}
		if held != nil {
			owner, err := held.Get()
			if err != nil {
				return ScheduleResult{}, err
			}
			if owner != nil {
				copy(out.ID[:], owner)
				out.Duplicate = true
				tr.Set(marker, packMarker(scheduleMarker{slot: slot, id: out.ID, dup: true, prev: prev}))
				return out, nil
			}
		}
		q.writeNewAt(tr, id, job, q.cfg.Clock.Now(), slot) // due at the slot, even one at the zero time (RunAt zero: none)
		tr.Add(q.signal, one)
		tr.Set(marker, packMarker(scheduleMarker{slot: slot, id: id, prev: prev}))
		out.ID, out.Added = id, true
		return out, nil
	})
}

// slotTagSize is how many of a scheduled job's ID bytes are its slot's
// tag (slotTag); the other four are random.
const slotTagSize = 12

// slotTag is the start of the ID of every job Schedule adds for the slot
// of the schedule name that starts at slot (Unix µs): the first
// slotTagSize bytes of the SHA-256 of the slot and the name, each 0x00
// byte made 0x01 as in a random ID (entropy.fill), so that the job of a
// slot can be found in the ID index without the marker. Another job's ID
// starts so by chance once in 255^12 (about 10^28).
func slotTag(name string, slot int64) [slotTagSize]byte {
	h := sha256.New()
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(slot)))
	h.Write([]byte(name))
	var tag [slotTagSize]byte
	copy(tag[:], h.Sum(nil))
	noZeros(tag[:])
	return tag
}

// slotID returns a new ID for a job of the slot tagged tag: tag, then
// random bytes.
func (q *JobQueue) slotID(tag [slotTagSize]byte) (JobID, error) {
	id, err := q.newID()
	if err != nil {
		return id, err
	}
	copy(id[:], tag[:])
	return id, nil
}

// slotJobs is the range of the ID index entries ("x", job ID) of the jobs
// whose IDs start with tag: the packed byte string's code and tag (none of
// its bytes 0x00, so none is escaped) start every such key.
func (q *JobQueue) slotJobs(tag [slotTagSize]byte) kv.KeyRange {
	b := append(q.key("x"), 0x01)
	b = append(b, tag[:]...)
	end := bytes.Clone(b)
	for end[len(end)-1] == 0xff { // the prefix starts with the string code 0x02: never all 0xff
		end = end[:len(end)-1]
	}
	end[len(end)-1]++
	return kv.KeyRange{Begin: b, End: end}
}

// indexedID returns the job ID of the ID index entry at key, and false
// for a key that is not ("x", 16-byte ID).
func (q *JobQueue) indexedID(key []byte) (JobID, bool) {
	var id JobID
	t, err := q.sub.Unpack(key)
	if err != nil || len(t) != 2 {
		return id, false
	}
	b, ok := t[1].([]byte)
	if !ok || len(b) != len(id) {
		return id, false
	}
	copy(id[:], b)
	return id, true
}

// scheduleMarker is a schedule marker's value, packed as (slot µs, job ID,
// duplicate) or, after a Schedule moved it on from an earlier slot,
// (slot µs, job ID, duplicate, previous job ID).
type scheduleMarker struct {
	slot int64
	id   JobID
	dup  bool
	// prev is the job the marker named before the Schedule that wrote it
	// moved it on (zero: none), so that a retry of the Schedule that added
	// that job, after commit_unknown_result, knows its commit landed.
	prev JobID
}

// packMarker is m packed.
func packMarker(m scheduleMarker) []byte {
	t := tuple.Tuple{m.slot, m.id[:], m.dup}
	if m.prev != (JobID{}) {
		t = append(t, m.prev[:])
	}
	b, _ := t.Pack()
	return b
}

// parseMarker reads the value b of the marker at key. It reads the first
// three fields, and a fourth that is a 16-byte job ID as the previous
// job, and ignores any others: a later version may append fields (this one
// drops them when it rewrites the marker), and must change the first three
// to stop this version from scheduling. A value whose first three are not
// this version's is a *ForeignKeyError.
func parseMarker(key, b []byte) (scheduleMarker, error) {
	var m scheduleMarker
	t, err := tuple.Unpack(b)
	if err == nil && len(t) >= 3 {
		s, ok1 := t[0].(int64)
		raw, ok2 := t[1].([]byte)
		d, ok3 := t[2].(bool)
		if ok1 && ok2 && ok3 && len(raw) == len(m.id) {
			m.slot, m.dup = s, d
			copy(m.id[:], raw)
			if len(t) >= 4 {
				if p, ok := t[3].([]byte); ok && len(p) == len(m.prev) {
					copy(m.prev[:], p)
				}
			}
			return m, nil
		}
	}
	shown := fmt.Sprintf("%x", b)
	if len(b) > markerShown {
		shown = fmt.Sprintf("%x... (%d bytes)", b[:markerShown], len(b))
	}
	return m, &ForeignKeyError{Key: bytes.Clone(key),
		Reason: fmt.Sprintf("periodic job marker %s: want (slot µs, 16-byte job ID, duplicate, ...)", shown)}
}

// markerShown is how many bytes of an unreadable marker its error shows:
// a value may hold up to kv.MaxValueSize.
const markerShown = 64

// RunScheduler runs the schedules jobs until ctx ends, then returns nil:
// it calls Schedule for each at once, then again for each as its next
// slot starts on the queue's Clock (it sleeps on Clock.After, so a fake
// clock drives it). Run it in every process that may schedule: the
// schedulers add one job per slot between them (see Schedule), so the
// schedule goes on while any of them runs. A slot missed while none ran
// is not caught up: the next call adds the latest slot only.
//
// The jobs are checked first, as Schedule checks one, and two with the
// same Name fail with ErrInvalidArgument; so does an empty list. A
// Schedule that fails ends the loop and RunScheduler returns its error
// (transient errors are retried inside it, until ctx ends): restart it,
// losing no more than the slots that pass meanwhile, of which the next
// call adds the latest. A marker Schedule cannot read is such an error
// (a *ForeignKeyError) at every start until it is removed: Unschedule
// its name.
//
// A schedule whose marker holds a later slot than the clock's
// (ScheduleResult.Ahead, see Schedule) adds nothing, and RunScheduler
// goes on calling it at each of its slots: it logs a Warn line through
// the queue's logger (WithLogger) naming the schedule, the marker's slot,
// now and how far ahead the marker is, once each time the schedule falls
// behind its marker, not at every slot.
func (q *JobQueue) RunScheduler(ctx context.Context, db kv.Database, jobs []PeriodicJob) error {
	ps := make([]periodic, len(jobs))
	for i, pj := range jobs {
		ps[i] = pj.periodic()
	}
	return q.runScheduler(ctx, db, ps)
}

// runScheduler is RunScheduler of jobs.
func (q *JobQueue) runScheduler(ctx context.Context, db kv.Database, jobs []periodic) error {
	if err := q.usable(); err != nil {
		return err
	}
	if err := checkTransactor(db); err != nil {
		return err
	}
	if len(jobs) == 0 {
		return fmt.Errorf("%w: no periodic jobs to run", ErrInvalidArgument)
	}
	names := make(map[string]bool, len(jobs))
	for _, pj := range jobs {
		if err := q.checkPeriodic(pj); err != nil {
			return err
		}
		if names[pj.Name] {
			return fmt.Errorf("%w: two periodic jobs named %q", ErrInvalidArgument, pj.Name)
		}
		names[pj.Name] = true
	}
	done := make([]int64, len(jobs)) // the last slot each was scheduled for
	for i := range done {
		done[i] = math.MinInt64
	}
	aheadLogged := make([]bool, len(jobs)) // its marker was ahead at its last call, which was logged
	for {
		if ctx.Err() != nil {
			return nil
		}
		now := q.cfg.Clock.Now()
		next := int64(math.MaxInt64)
		for i, pj := range jobs {
			slot, ok := slotOf(now, pj.Every)
			if !ok || slot > done[i] { // !ok: Schedule refuses now
				r, err := q.schedule(ctx, db, pj, now)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				done[i] = slot
				if ahead := !r.Ahead.IsZero(); ahead != aheadLogged[i] {
					aheadLogged[i] = ahead
					if ahead {
						q.journal.track.obs.markerAheadLogged(pj.Name, r.Ahead, now)
					}
				}
			}
			if p := pj.Every.Microseconds(); slot <= math.MaxInt64-p {
				next = min(next, slot+p)
			}
		}
		// From the clock's time after the calls: sleeping from now would
		// add their duration to every wait on a real clock.
		wait := time.UnixMicro(next).Sub(q.cfg.Clock.Now())
		select {
		case <-ctx.Done():
			return nil
		case <-q.cfg.Clock.After(wait):
		}
	}
}
