package fdbqueue

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// ScheduleInfo is a schedule's marker, the key ("p", Name) in the queue's
// subspace that Schedule keeps, as Schedules and Unschedule read it.
type ScheduleInfo struct {
	Name string // the schedule's name, PeriodicJob.Name
	// Slot is the start of the last slot scheduled, in UTC: Schedule adds
	// a job only for a later slot. A Slot after the clock's now was
	// scheduled by a clock ahead of this one, or by a call given a later
	// now: nothing is added until now reaches the slot after it.
	Slot time.Time
	// ID is the job added for Slot or, when Duplicate is set, the job that
	// held its unique key, for which the slot was skipped. That job may
	// have been acked, cancelled or dead-lettered since: Job tells.
	ID        JobID
	Duplicate bool
	// Err is nil for a marker this version reads. For one whose first
	// three fields are not (slot µs, 16-byte job ID, duplicate), corrupt
	// or written by another program, it is a *ForeignKeyError naming the
	// marker's key (errors.Is ErrForeignKey); Slot, ID and Duplicate are
	// then zero and Raw holds the stored value. Schedule refuses such a
	// marker with that error, as RunScheduler then does; Unschedule
	// removes it.
	Err error
	// Raw is the marker's stored value when Err is set, nil otherwise.
	Raw []byte
}

// checkScheduleName checks a schedule's name and that its marker key fits;
// with anyLength, a name over MaxScheduleNameSize too (Unschedule removes
// a marker another program wrote under a longer name).
func (q *JobQueue) checkScheduleName(name string, anyLength bool) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: a periodic job needs a name", ErrInvalidArgument)
	case len(name) > MaxScheduleNameSize && !anyLength:
		return fmt.Errorf("%w: periodic job name of %d bytes, limit %d", ErrInvalidArgument, len(name), MaxScheduleNameSize)
	}
	if n := len(q.key("p", name)); n > kv.MaxKeySize {
		return fmt.Errorf("%w: periodic job name of %d bytes makes a %d-byte key on this subspace, over the %d-byte key limit (%w)",
			ErrInvalidArgument, len(name), n, kv.MaxKeySize, kv.ErrKeyTooLarge)
	}
	return nil
}

// scheduleInfo reads the marker key = value. A key that is not a
// marker's fails; a value this version cannot read is the info's Err.
func (q *JobQueue) scheduleInfo(key, value []byte) (ScheduleInfo, error) {
	t, err := q.sub.Unpack(key)
	var name string
	ok := err == nil && len(t) == 2
	if ok {
		name, ok = t[1].(string)
	}
	if !ok {
		return ScheduleInfo{}, &ForeignKeyError{Key: bytes.Clone(key), Reason: "want (\"p\", schedule name)"}
	}
	m, err := parseMarker(key, value)
	if err != nil {
		return ScheduleInfo{Name: name, Err: err, Raw: bytes.Clone(value)}, nil
	}
	return ScheduleInfo{Name: name, Slot: time.UnixMicro(m.slot).UTC(), ID: m.id, Duplicate: m.dup}, nil
}

// Schedules returns up to limit of the queue's schedules, in the order of
// their names' bytes, from the name from on ("" lists from the first):
// each schedule's marker, which Schedule writes at its first slot and only
// Unschedule removes, so a schedule no process runs any more is listed
// too, with its last slot. To list them all, page: call again with the
// last Name listed + "\x00" until fewer than limit come back. A schedule
// that Schedule has never run has no marker and is not listed. A marker
// this version cannot read is listed too, under its name, with its Err
// (a *ForeignKeyError) and Raw value: Unschedule removes it. A limit
// below 1, or a from whose marker key would pass the key limit, fails
// with ErrInvalidArgument; a key in the markers' range that is not a
// marker's, ("p", a string), but another program's, with ErrForeignKey
// (a *ForeignKeyError naming it): it has no name to list it under, and
// only a clear of that key removes it.
//
// Cost: one round trip, one range read of up to limit markers (a key of
// the subspace's prefix and the packed name, at most about 2,000 bytes,
// and a value of about 30 bytes each), no write. Its reads are t's, as
// Job's: given a Database, a read-only transaction of its own, which
// conflicts with nothing; given your Transaction, a normal range read of
// the markers listed (to the end of the markers' range when fewer than
// limit came back), so that a transaction that acts on the list
// (Unschedule of the names it does not know) conflicts with a Schedule
// or Unschedule in that range committed meanwhile, and retries; given
// tr.Snapshot(), a snapshot read, which adds no conflict range.
func (q *JobQueue) Schedules(ctx context.Context, t kv.ReadTransactor, from string, limit int) ([]ScheduleInfo, error) {
	if err := q.usable(); err != nil {
		return nil, err
	}
	if err := checkTransactor(t); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit %d, want at least 1", ErrInvalidArgument, limit)
	}
	r, _ := q.sub.Range("p")
	if from != "" {
		r.Begin = q.key("p", from)
		if len(r.Begin) > kv.MaxKeySize {
			return nil, fmt.Errorf("%w: schedule name of %d bytes to list from makes a %d-byte key on this subspace, over the %d-byte key limit (%w)",
				ErrInvalidArgument, len(from), len(r.Begin), kv.MaxKeySize, kv.ErrKeyTooLarge)
		}
	}
	return kv.ReadTransact(ctx, q.journal.gate.reads(t), func(tr kv.ReadTransaction) ([]ScheduleInfo, error) { // config.go
		kvs, err := tr.GetRange(r, kv.RangeOptions{Limit: limit}).GetSlice()
		if err != nil {
			return nil, err
		}
		out := make([]ScheduleInfo, len(kvs))
		for i, p := range kvs {
			if out[i], err = q.scheduleInfo(p.Key, p.Value); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
}

// Unschedule removes the marker of the schedule name and returns what it
// held: the schedule's last slot and job. Jobs it added stay as they are
// (Cancel removes one). A marker this version cannot read (corrupt, or
// another program's), which Schedule refuses to overwrite, is removed
// too: the result then has its Err set (a *ForeignKeyError) and its Raw
// value, and no slot or job, and the error is nil. It fails with
// ErrScheduleNotFound when the queue has no marker of that name (never
// scheduled, or unscheduled already), and with ErrInvalidArgument for an
// empty name or one whose key would pass the key limit. A name over
// MaxScheduleNameSize bytes, which Schedule refuses, is accepted, so that
// every marker Schedules lists, another program's too, can be removed.
//
// Unschedule a schedule once no process runs it: take it out of every
// RunScheduler's list first. A scheduler still running it (a RunScheduler,
// or any Schedule of the name) finds no marker at its next call and
// schedules afresh: it adds the slot under way and writes the marker
// again. A Schedule of the name in the slot whose job was added before
// the Unschedule finds that job by its ID (see Schedule) and adds nothing
// while it is in the queue (queued, leased or dead); once it is acked,
// cancelled or deleted, nothing shows the slot was added, and it adds the
// slot's job a second time. A RunScheduler that scheduled the slot itself
// does not call again before the next slot.
//
// Conflicts: a normal read of the marker, so it conflicts with a
// Schedule or Unschedule of the same name only; of two that race, the
// second to commit retries and sees the first's result (a Schedule then
// re-creates the marker, an Unschedule finds it gone). Cost: one round
// trip (the journal and the marker read together), then a clear and the
// journal record.
//
// Exactly once: under commit_unknown_result the retry finds the journal
// record and returns the first attempt's result (the marker it removed),
// not ErrScheduleNotFound. Inside your own transaction pass WithOpID (see
// the package documentation, "Exactly once"): without it, your retry of
// a commit that landed finds no marker and fails with ErrScheduleNotFound.
// Given a nil or zero JobQueue, or a nil transactor, it fails with
// ErrInvalidArgument.
func (q *JobQueue) Unschedule(ctx context.Context, t kv.Transactor, name string, opts ...OpOption) (ScheduleInfo, error) {
	if err := q.usable(); err != nil {
		return ScheduleInfo{}, err
	}
	if err := checkTransactor(t); err != nil {
		return ScheduleInfo{}, err
	}
	if err := q.checkScheduleName(name, true); err != nil {
		return ScheduleInfo{}, err
	}
	marker := q.key("p", name)
	t = q.journal.track.observe("unschedule", t)
	o := q.journal.begin(t, opts)
	var gate gateRead
	info, err := kv.Transact(ctx, t, func(tr kv.Transaction) (ScheduleInfo, error) {
		o.gate = q.journal.gate.issueInto(&gate, tr, false, o.owned) // config.go
		rec, err := o.check(tr)
		if err != nil {
			return ScheduleInfo{}, err
		}
		mf := tr.Get(marker) // normal read: Schedules of the name conflict
		if prev, done, err := o.applied(rec); err != nil || done {
			if err != nil {
				return ScheduleInfo{}, err
			}
			if len(prev) != 1 {
				return ScheduleInfo{}, fmt.Errorf("%w: journal holds %d unschedule results, want 1", ErrForeignKey, len(prev))
			}
			return q.scheduleInfo(marker, prev[0])
		}
		raw, err := mf.Get()
		if err != nil {
			return ScheduleInfo{}, err
		}
		if raw == nil {
			return ScheduleInfo{}, fmt.Errorf("%w: %q", ErrScheduleNotFound, name)
		}
		info, err := q.scheduleInfo(marker, raw) // an unreadable value is info.Err: removed all the same
		if err != nil {
			return ScheduleInfo{}, err
		}
		tr.Clear(marker)
		o.record(tr, raw)
		return info, nil
	})
	o.end(err)
	return info, o.unknownResult(err)
}
