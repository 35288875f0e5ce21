package fdbqueue

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// ScheduleInfo is a schedule's marker, the key ("p", Name) in the queue's
// subspace that Schedule keeps, as Schedules and Unschedule read it; or,
// in a Schedules listing, a key of the markers' range that is not a
// marker's (Name empty, Err set).
type ScheduleInfo struct {
	// Name is the schedule's name, PeriodicJob.Name; empty for a key that
	// is not a marker's, ("p", a string), but another program's, such as
	// ("p", 7) or ("p", "x", "y"): it has no name.
	Name string
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
	// Err is nil for a marker this version reads. It is a
	// *ForeignKeyError (errors.Is ErrForeignKey) naming Key for a marker
	// whose first three fields are not (slot µs, 16-byte job ID,
	// duplicate), corrupt or written by another program, and for a key
	// that is not a marker's (Name empty); Slot, ID and Duplicate are then
	// zero and Raw holds the stored value. Schedule refuses such a marker
	// with that error, as RunScheduler then does; Unschedule removes it. A
	// key that is not a marker's is nothing Schedule or Unschedule reads:
	// clear Key to remove it (tr.Clear(info.Key)), once no program uses it.
	Err error
	// Raw is the stored value when Err is set, nil otherwise.
	Raw []byte
	// Key is the marker's key, in full (the subspace's prefix, then the
	// packed ("p", Name)), or the key that is not a marker's. It is also
	// Schedules' cursor: a call given it lists the keys after this one.
	Key []byte
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

// scheduleInfo reads the marker key = value: a value this version
// cannot read, or a key that is not a marker's, is the info's Err.
func (q *JobQueue) scheduleInfo(key, value []byte) ScheduleInfo {
	key = bytes.Clone(key)
	t, err := q.sub.Unpack(key)
	var name string
	ok := err == nil && len(t) == 2
	if ok {
		name, ok = t[1].(string)
	}
	if !ok {
		return ScheduleInfo{Key: key, Raw: bytes.Clone(value),
			Err: &ForeignKeyError{Key: key, Reason: "not a periodic job marker: want (\"p\", schedule name)"}}
	}
	m, err := parseMarker(key, value)
	if err != nil {
		return ScheduleInfo{Name: name, Err: err, Raw: bytes.Clone(value), Key: key}
	}
	return ScheduleInfo{Name: name, Slot: time.UnixMicro(m.slot).UTC(), ID: m.id, Duplicate: m.dup, Key: key}
}

// ScheduleCursorAt returns a cursor from which Schedules lists the
// schedules from name on, in the order of the names' bytes: name's marker
// first, if there is one. The keys of the markers' range that sort before
// it, another program's among them, are not listed. It reads nothing. A
// name whose marker key would pass the key limit gives a cursor that
// Schedules refuses.
func (q *JobQueue) ScheduleCursorAt(name string) []byte {
	if q.usable() != nil {
		return nil
	}
	// The marker key without the string's terminating 0x00: it sorts
	// just before the marker key, and no key lies between them.
	k := q.key("p", name)
	return k[:len(k)-1]
}

// Schedules returns up to limit keys of the queue's schedule markers'
// range ("p", ...) in key order, starting after cursor (nil: from the
// first; else a ScheduleInfo's Key, or one of ScheduleCursorAt): each
// schedule's marker, which Schedule writes at its first slot and only
// Unschedule removes, so a schedule no process runs any more is listed
// too, with its last slot. The markers come in the order of their names'
// bytes. To list them all, page: call again with the last entry's Key
// until fewer than limit come back; each key is listed once, whatever it
// is. A schedule that Schedule has never run has no marker and is not
// listed. A marker this version cannot read is listed under its name,
// with its Err (a *ForeignKeyError) and Raw value: Unschedule removes it.
// A key in the range that is not a marker's, ("p", a string), but another
// program's, is listed in its place with an empty Name, its Err (a
// *ForeignKeyError naming it), Raw value and Key: no name reaches it, so
// Unschedule cannot remove it; clear its Key. A limit below 1 fails with
// ErrInvalidArgument, as does a cursor that is not one of this queue's
// markers' range, or over the key limit (with kv.ErrKeyTooLarge).
//
// Cost: one round trip, one range read of up to limit markers (a key of
// the subspace's prefix and the packed name, at most about 2,000 bytes,
// and a value of about 50 bytes each), no write. Its reads are t's, as
// Job's: given a Database, a read-only transaction of its own, which
// conflicts with nothing; given your Transaction, a normal range read of
// the markers listed (to the end of the markers' range when fewer than
// limit came back), so that a transaction that acts on the list
// (Unschedule of the names it does not know) conflicts with a Schedule
// or Unschedule in that range committed meanwhile, and retries; given
// tr.Snapshot(), a snapshot read, which adds no conflict range.
func (q *JobQueue) Schedules(ctx context.Context, t kv.ReadTransactor, cursor []byte, limit int) ([]ScheduleInfo, error) {
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
	if cursor != nil {
		if !bytes.HasPrefix(cursor, q.key("p")) || bytes.Compare(cursor, r.End) >= 0 {
			return nil, fmt.Errorf("%w: cursor is not a schedules cursor of this queue", ErrInvalidArgument)
		}
		if len(cursor) > kv.MaxKeySize {
			return nil, fmt.Errorf("%w: a schedules cursor of %d bytes, over the %d-byte key limit: no marker is listed after it (%w)",
				ErrInvalidArgument, len(cursor), kv.MaxKeySize, kv.ErrKeyTooLarge)
		}
		r.Begin = append(bytes.Clone(cursor), 0x00)
	}
	return kv.ReadTransact(ctx, q.journal.gate.reads(t), func(tr kv.ReadTransaction) ([]ScheduleInfo, error) { // config.go
		kvs, err := tr.GetRange(r, kv.RangeOptions{Limit: limit}).GetSlice()
		if err != nil {
			return nil, err
		}
		out := make([]ScheduleInfo, len(kvs))
		for i, p := range kvs {
			out[i] = q.scheduleInfo(p.Key, p.Value)
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
// every marker Schedules lists under a name, another program's too, can
// be removed (a key Schedules lists without a name is not a marker: clear
// its ScheduleInfo.Key).
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
			return q.scheduleInfo(marker, prev[0]), nil
		}
		raw, err := mf.Get()
		if err != nil {
			return ScheduleInfo{}, err
		}
		if raw == nil {
			return ScheduleInfo{}, fmt.Errorf("%w: %q", ErrScheduleNotFound, name)
		}
		info := q.scheduleInfo(marker, raw) // an unreadable value is info.Err: removed all the same
		tr.Clear(marker)
		o.record(tr, raw)
		return info, nil
	})
	o.end(err)
	return info, o.unknownResult(err)
}
