package fdbqueue_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// mustSchedules returns every schedule of q, read in pages of limit,
// each after the last key of the one before.
func mustSchedules(t *testing.T, db kv.Database, q *fdbqueue.JobQueue, limit int) []fdbqueue.ScheduleInfo {
	t.Helper()
	var all []fdbqueue.ScheduleInfo
	var cursor []byte
	for {
		page, err := q.Schedules(context.Background(), db, cursor, limit)
		require.NoError(t, err)
		all = append(all, page...)
		if len(page) < limit {
			return all
		}
		cursor = page[len(page)-1].Key
	}
}

// markerKey is the key of the marker of the schedule name in q.
func markerKey(t *testing.T, q *fdbqueue.JobQueue, name string) []byte {
	t.Helper()
	key, err := q.Subspace().Pack(tuple.Tuple{"p", name})
	require.NoError(t, err)
	return key
}

// named returns a schedule of name, every period, whose job has unique
// key uk (none if empty).
func named(name string, every time.Duration, uk string) fdbqueue.PeriodicJob {
	return fdbqueue.PeriodicJob{Name: name, Every: every, Job: func(time.Time) fdbqueue.Job {
		return fdbqueue.Job{Value: []byte(name), UniqueKey: uk}
	}}
}

// Schedules lists every marker in the order of the names' bytes (a 0x00
// byte and a name of MaxScheduleNameSize bytes included), each with its
// last slot, in UTC, its job and its key; a page starts after its cursor,
// a ScheduleInfo's Key (paging with the last one lists each once) or one
// of ScheduleCursorAt (from that name on); a skipped slot (unique key
// held) is listed as Duplicate, naming the holder.
func TestSchedulesList(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "schedules-list", fdbqueue.JobQueueConfig{Clock: clock})
	got, err := q.Schedules(ctx, db, nil, 10)
	require.NoError(t, err)
	require.Empty(t, got, "no schedule yet")

	long := strings.Repeat("z", fdbqueue.MaxScheduleNameSize)
	holder := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("held"), UniqueKey: "sync"})
	want := map[string]fdbqueue.ScheduleInfo{}
	at := clock.Now().Add(90 * time.Minute).In(time.FixedZone("east", 5*3600))
	for _, pj := range []fdbqueue.PeriodicJob{
		named("b", time.Hour, ""), named("a\x00b", time.Minute, ""), named("a", 7*time.Second, ""),
		named("é", time.Hour, ""), named(long, time.Hour, ""), named("sync", time.Hour, "sync"),
	} {
		r, err := q.Schedule(ctx, db, pj, at)
		require.NoError(t, err)
		require.Equal(t, pj.Name != "sync", r.Added, pj.Name)
		want[pj.Name] = fdbqueue.ScheduleInfo{Name: pj.Name, Slot: r.Slot.UTC(), ID: r.ID, Duplicate: r.Duplicate, Key: markerKey(t, q, pj.Name)}
	}
	require.Equal(t, holder.ID, want["sync"].ID)
	order := []string{"a", "a\x00b", "b", "sync", long, "é"} // by bytes: 'z' < 0xc3
	for _, limit := range []int{1, 2, 5, 6, 100} {
		all := mustSchedules(t, db, q, limit)
		require.Len(t, all, len(order), "limit %d", limit)
		for i, name := range order {
			require.Equal(t, want[name], all[i], "limit %d: %q", limit, name)
			require.Equal(t, time.UTC, all[i].Slot.Location())
		}
	}
	page, err := q.Schedules(ctx, db, q.ScheduleCursorAt("a\x00b"), 2)
	require.NoError(t, err)
	require.Equal(t, []fdbqueue.ScheduleInfo{want["a\x00b"], want["b"]}, page, "from a name: that name first")
	page, err = q.Schedules(ctx, db, q.ScheduleCursorAt("c"), 10)
	require.NoError(t, err)
	require.Equal(t, []fdbqueue.ScheduleInfo{want["sync"], want[long], want["é"]}, page, "from a name that is none: the next")
	page, err = q.Schedules(ctx, db, want[long].Key, 10)
	require.NoError(t, err)
	require.Equal(t, []fdbqueue.ScheduleInfo{want["é"]}, page, "after the longest name's key")
	page, err = q.Schedules(ctx, db, q.ScheduleCursorAt(long+"\x00"), 10)
	require.NoError(t, err)
	require.Equal(t, []fdbqueue.ScheduleInfo{want["é"]}, page, "from a name after the longest")

	// A later slot moves the listed slot and job.
	r, err := q.Schedule(ctx, db, named("b", time.Hour, ""), at.Add(time.Hour))
	require.NoError(t, err)
	page, err = q.Schedules(ctx, db, q.ScheduleCursorAt("b"), 1)
	require.NoError(t, err)
	require.Equal(t, []fdbqueue.ScheduleInfo{{Name: "b", Slot: r.Slot.UTC(), ID: r.ID, Key: want["b"].Key}}, page)
}

// Schedules refuses a limit below 1, a cursor outside the markers' range
// (another range's key, ListDead's cursor, a key past the range) and one
// over the key limit (ErrInvalidArgument).
func TestSchedulesBadInput(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "schedules-bad", fdbqueue.JobQueueConfig{Clock: clock})
	for _, limit := range []int{0, -1} {
		_, err := q.Schedules(ctx, db, nil, limit)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "limit %d", limit)
	}
	_, err := q.Schedules(ctx, db, q.ScheduleCursorAt(strings.Repeat("\x00", kv.MaxKeySize/2)), 1)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	require.ErrorIs(t, err, kv.ErrKeyTooLarge)
	_, err = q.Schedules(ctx, db, q.ScheduleCursorAt(strings.Repeat("n", fdbqueue.MaxScheduleNameSize+1)), 1)
	require.NoError(t, err, "from a name one byte past the longest: the page after it")

	other := mustJobQueue(t, "schedules-bad-other", fdbqueue.JobQueueConfig{Clock: clock})
	rng, err := q.Subspace().Range("p")
	require.NoError(t, err)
	for name, cursor := range map[string][]byte{
		"another queue's":     other.ScheduleCursorAt("a"),
		"a dead-letter one":   q.DeadCursorAt(clock.Now()),
		"the range's end":     rng.End,
		"past the range":      append(rng.End, 1),
		"the subspace prefix": q.Subspace().Bytes(),
		"empty":               {},
	} {
		_, err := q.Schedules(ctx, db, cursor, 1)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, name)
	}
}

// A key in the markers' range that is not a marker's, ("p", a string)
// (another program's: ("p", 7), ("p", "x", "y"), ("p", nil), ("p",
// bytes)), is listed by Schedules in its key order with an empty Name,
// its Err (a *ForeignKeyError naming it), Raw value and Key, the markers
// around it as usual; paging after each entry's Key lists every key once
// at every limit, foreign keys at the start, in the middle (("p", "x",
// "y") sorts between ("p", "x") and ("p", "x\x00"), which paging after
// the last name + "\x00" used to skip), at the end, and on page
// boundaries. A Schedule and an Unschedule of the names next to them
// are unaffected. Schedules used to fail with ErrForeignKey, listing
// nothing.
func TestSchedulesListForeignKeys(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "schedules-foreign", fdbqueue.JobQueueConfig{Clock: clock})
	results := map[string]fdbqueue.ScheduleResult{}
	for _, name := range []string{"a", "x", "x\x00", "y"} {
		r, err := q.Schedule(ctx, db, hourly(name), clock.Now())
		require.NoError(t, err)
		results[name] = r
	}
	foreign := []struct {
		key   tuple.Tuple
		value []byte
	}{
		{tuple.Tuple{"p", nil}, []byte{}},                // before every marker
		{tuple.Tuple{"p", []byte("bytes")}, []byte("v")}, // before every marker
		{tuple.Tuple{"p", "x", "y"}, []byte("between")},  // between "x" and "x\x00"
		{tuple.Tuple{"p", "x\x00", int64(1)}, []byte{0}}, // between "x\x00" and "y"
		{tuple.Tuple{"p", int64(7)}, []byte("seven")},    // after every marker
		{tuple.Tuple{"p", false}, nil},                   // after every marker
	}
	for _, f := range foreign {
		key, err := q.Subspace().Pack(f.key)
		require.NoError(t, err)
		v := f.value
		if v == nil {
			v = bytes.Repeat([]byte{0xee}, 100)
		}
		_, err = kv.Transact(ctx, db, func(tr kv.Transaction) (struct{}, error) { tr.Set(key, v); return struct{}{}, nil })
		require.NoError(t, err)
	}
	marker := func(name string) fdbqueue.ScheduleInfo {
		r := results[name]
		return fdbqueue.ScheduleInfo{Name: name, Slot: r.Slot.UTC(), ID: r.ID, Key: markerKey(t, q, name)}
	}
	stray := func(i int) fdbqueue.ScheduleInfo {
		key, err := q.Subspace().Pack(foreign[i].key)
		require.NoError(t, err)
		v := foreign[i].value
		if v == nil {
			v = bytes.Repeat([]byte{0xee}, 100)
		}
		return fdbqueue.ScheduleInfo{Key: key, Raw: v,
			Err: &fdbqueue.ForeignKeyError{Key: key, Reason: `not a periodic job marker: want ("p", schedule name)`}}
	}
	want := []fdbqueue.ScheduleInfo{stray(0), stray(1), marker("a"), marker("x"), stray(2), marker("x\x00"), stray(3), marker("y"), stray(4), stray(5)}
	for limit := 1; limit <= len(want)+1; limit++ {
		got := mustSchedules(t, db, q, limit)
		require.Equal(t, want, got, "limit %d: every key once, in key order", limit)
	}
	for _, i := range []int{0, 1, 4, 6, 8, 9} {
		var fk *fdbqueue.ForeignKeyError
		require.ErrorAs(t, want[i].Err, &fk)
		require.ErrorIs(t, want[i].Err, fdbqueue.ErrForeignKey)
		require.Empty(t, want[i].Name)
	}
	page, err := q.Schedules(ctx, db, q.ScheduleCursorAt("x"), 3)
	require.NoError(t, err)
	require.Equal(t, want[3:6], page, "from a name on: the foreign key after it too")
	page, err = q.Schedules(ctx, db, want[4].Key, 2)
	require.NoError(t, err)
	require.Equal(t, want[5:7], page, "after a foreign key's Key")

	// Schedule and Unschedule of the names around them work as ever;
	// clearing the Key is what removes a foreign key.
	next, err := q.Schedule(ctx, db, hourly("x"), clock.Now().Add(time.Hour))
	require.NoError(t, err)
	require.True(t, next.Added)
	info, err := q.Unschedule(ctx, db, "x")
	require.NoError(t, err)
	require.Equal(t, next.ID, info.ID)
	_, err = kv.Transact(ctx, db, func(tr kv.Transaction) (struct{}, error) { tr.Clear(want[4].Key); return struct{}{}, nil })
	require.NoError(t, err)
	require.Equal(t, []fdbqueue.ScheduleInfo{want[0], want[1], want[2], want[5], want[6], want[7], want[8], want[9]}, mustSchedules(t, db, q, 3))
}

// Unschedule removes the marker and returns what it held; the jobs the
// schedule added stay; a second Unschedule fails with
// ErrScheduleNotFound, as does one of a name never scheduled.
func TestUnschedule(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "unschedule", fdbqueue.JobQueueConfig{Clock: clock})
	r, err := q.Schedule(ctx, db, hourly("report"), clock.Now())
	require.NoError(t, err)
	_, err = q.Schedule(ctx, db, hourly("other"), clock.Now())
	require.NoError(t, err)

	info, err := q.Unschedule(ctx, db, "report")
	require.NoError(t, err)
	require.Equal(t, fdbqueue.ScheduleInfo{Name: "report", Slot: r.Slot.UTC(), ID: r.ID, Key: markerKey(t, q, "report")}, info)
	all := mustSchedules(t, db, q, 10)
	require.Len(t, all, 1)
	require.Equal(t, "other", all[0].Name, "the other schedule stays")
	require.Equal(t, fdbqueue.JobQueued, mustInfo(t, db, q, r.ID).State, "the job it added stays")
	require.Equal(t, int64(2), mustStats(t, db, q).Queued)

	_, err = q.Unschedule(ctx, db, "report")
	require.ErrorIs(t, err, fdbqueue.ErrScheduleNotFound)
	_, err = q.Unschedule(ctx, db, "never")
	require.ErrorIs(t, err, fdbqueue.ErrScheduleNotFound)
	require.Contains(t, err.Error(), `"never"`)
}

// Unschedule under commit_unknown_result, applied or not, returns the
// marker it removed, once: its retry finds the journal record, not
// ErrScheduleNotFound. Inside the caller's transaction, a retry under the
// same WithOpID returns the first attempt's result; without it, a retry
// of a commit that landed finds nothing. (FDB's commit_unknown_result,
// 1021: Transaction::onError retries it, fdbclient/NativeAPI.actor.cpp,
// and the commit may or may not have applied.)
func TestUnscheduleUnknownResult(t *testing.T) {
	for _, applied := range []bool{true, false} {
		t.Run(map[bool]string{true: "applied", false: "not applied"}[applied], func(t *testing.T) {
			ctx := context.Background()
			db := newDB(t)
			clock := newFakeClock()
			q := mustJobQueue(t, "unschedule-unknown", fdbqueue.JobQueueConfig{Clock: clock})
			r, err := q.Schedule(ctx, db, hourly("report"), clock.Now())
			require.NoError(t, err)
			db.FailNextCommit(kv.ErrCommitUnknownResult, applied)
			info, err := q.Unschedule(ctx, db, "report")
			require.NoError(t, err)
			require.Equal(t, r.ID, info.ID)
			require.Equal(t, int64(1), db.Stats().InjectedForced, "the fault was injected")
			require.Empty(t, mustSchedules(t, db, q, 10))
		})
	}

	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "unschedule-own", fdbqueue.JobQueueConfig{Clock: clock})
	r, err := q.Schedule(ctx, db, hourly("report"), clock.Now())
	require.NoError(t, err)
	id := fdbqueue.NewOpID()
	inTr := func(opts ...fdbqueue.OpOption) (fdbqueue.ScheduleInfo, error) {
		return kv.Transact(ctx, db, func(tr kv.Transaction) (fdbqueue.ScheduleInfo, error) {
			return q.Unschedule(ctx, tr, "report", opts...)
		})
	}
	first, err := inTr(fdbqueue.WithOpID(id))
	require.NoError(t, err)
	require.Equal(t, r.ID, first.ID)
	again, err := inTr(fdbqueue.WithOpID(id))
	require.NoError(t, err, "a retry under the same ID")
	require.Equal(t, first, again)
	_, err = inTr()
	require.ErrorIs(t, err, fdbqueue.ErrScheduleNotFound, "without an ID, a retry is a new call")
}

// Bad names fail with ErrInvalidArgument, never a panic, and remove
// nothing.
func TestUnscheduleBadInput(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "unschedule-bad", fdbqueue.JobQueueConfig{Clock: clock})
	_, err := q.Schedule(ctx, db, hourly("ok"), clock.Now())
	require.NoError(t, err)
	long, err := fdbqueue.NewJobQueue(fdbqueue.SubspaceFromBytes([]byte(strings.Repeat("L", 8500))), fdbqueue.JobQueueConfig{Clock: clock})
	require.NoError(t, err)
	for name, c := range map[string]struct {
		q    *fdbqueue.JobQueue
		name string
	}{
		"empty name":       {q, ""},
		"key too large":    {long, strings.Repeat("\x00", fdbqueue.MaxScheduleNameSize)},
		"longest, no zero": {long, strings.Repeat("\x01", fdbqueue.MaxScheduleNameSize)},
	} {
		var err error
		require.NotPanics(t, func() { _, err = c.q.Unschedule(ctx, db, c.name) }, name)
		if name == "longest, no zero" {
			require.ErrorIs(t, err, fdbqueue.ErrScheduleNotFound, "%s: a good name", name)
			continue
		}
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, name)
	}
	require.Len(t, mustSchedules(t, db, q, 10), 1, "nothing removed")
}

// unreadable returns what Schedules and Unschedule give for the marker of
// name holding v, which this version cannot read.
func unreadable(t *testing.T, q *fdbqueue.JobQueue, name string, v []byte) fdbqueue.ScheduleInfo {
	t.Helper()
	key, err := q.Subspace().Pack(tuple.Tuple{"p", name})
	require.NoError(t, err)
	shown := fmt.Sprintf("%x", v)
	if len(v) > 64 { // the error shows the first 64 bytes of a longer value
		shown = fmt.Sprintf("%x... (%d bytes)", v[:64], len(v))
	}
	return fdbqueue.ScheduleInfo{Name: name, Raw: v, Key: key, Err: &fdbqueue.ForeignKeyError{Key: key,
		Reason: fmt.Sprintf("periodic job marker %s: want (slot µs, 16-byte job ID, duplicate, ...)", shown)}}
}

// A marker this version cannot read (not a tuple, or a tuple whose first
// three fields are not a slot, a 16-byte ID and a flag) is listed by
// Schedules under its name, in order, with its Err (a *ForeignKeyError
// naming its key) and raw value, the other schedules around it listed as
// usual; paging passes it. Schedule of its name still fails with that
// error, adding nothing; Unschedule removes it and returns it (nil
// error), after which the schedule starts afresh. Under
// commit_unknown_result the retry returns the same, from the journal,
// for a value of the largest size too. Schedules and Unschedule used to
// fail with ErrForeignKey, the listing of every schedule with them, and
// only a raw clear of the key removed it.
func TestUnreadableMarkerListedAndUnscheduled(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "schedules-unreadable", fdbqueue.JobQueueConfig{Clock: clock})
	a, err := q.Schedule(ctx, db, hourly("a"), clock.Now())
	require.NoError(t, err)
	c, err := q.Schedule(ctx, db, hourly("c"), clock.Now())
	require.NoError(t, err)
	wrong, err := tuple.Tuple{"soon", []byte{1, 2, 3}, false}.Pack()
	require.NoError(t, err)
	huge := bytes.Repeat([]byte{0xff}, kv.MaxValueSize)
	setMarker(t, db, q, "b", []byte("not a tuple"))
	setMarker(t, db, q, "d", wrong)
	setMarker(t, db, q, "e", huge)

	want := []fdbqueue.ScheduleInfo{
		{Name: "a", Slot: a.Slot.UTC(), ID: a.ID, Key: markerKey(t, q, "a")},
		unreadable(t, q, "b", []byte("not a tuple")),
		{Name: "c", Slot: c.Slot.UTC(), ID: c.ID, Key: markerKey(t, q, "c")},
		unreadable(t, q, "d", wrong),
		unreadable(t, q, "e", huge),
	}
	for _, limit := range []int{1, 2, 10} {
		got := mustSchedules(t, db, q, limit)
		require.Equal(t, want, got, "limit %d", limit)
		for _, i := range []int{1, 3, 4} {
			var fk *fdbqueue.ForeignKeyError
			require.ErrorAs(t, got[i].Err, &fk)
			require.ErrorIs(t, got[i].Err, fdbqueue.ErrForeignKey)
		}
		require.NoError(t, got[0].Err)
	}

	before := mustStats(t, db, q)
	_, err = q.Schedule(ctx, db, hourly("b"), clock.Now())
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey, "Schedule does not overwrite a marker it cannot read")
	require.Equal(t, before, mustStats(t, db, q), "nothing added")

	info, err := q.Unschedule(ctx, db, "b")
	require.NoError(t, err)
	require.Equal(t, want[1], info, "what the marker held, and that it could not be read")
	require.Equal(t, []fdbqueue.ScheduleInfo{want[0], want[2], want[3], want[4]}, mustSchedules(t, db, q, 10))
	r, err := q.Schedule(ctx, db, hourly("b"), clock.Now())
	require.NoError(t, err)
	require.True(t, r.Added, "the schedule starts afresh")

	for i, name := range []string{"d", "e"} {
		db.FailNextCommit(kv.ErrCommitUnknownResult, i == 0)
		info, err = q.Unschedule(ctx, db, name)
		require.NoError(t, err, name)
		require.Equal(t, want[3+i], info, "%s: once, the same from the retry", name)
		_, err = q.Unschedule(ctx, db, name)
		require.ErrorIs(t, err, fdbqueue.ErrScheduleNotFound, name)
	}
	require.Len(t, mustSchedules(t, db, q, 10), 3)
}

// Unschedule and Schedule of one name in overlapping transactions: the
// second to commit conflicts on the marker, which both read with a normal
// read (FDB's read conflict ranges, fdbserver/Resolver.actor.cpp), and
// its retry sees the first's result.
func TestUnscheduleConflictsWithSchedule(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "unschedule-conflict", fdbqueue.JobQueueConfig{Clock: clock})
	pj := hourly("report")
	_, err := q.Schedule(ctx, db, pj, clock.Now())
	require.NoError(t, err)
	next := clock.Now().Add(time.Hour)

	// Schedule first: the Unschedule's commit fails; its retry removes
	// the marker Schedule wrote.
	trU, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	_, err = q.Unschedule(ctx, trU, "report")
	require.NoError(t, err)
	s, err := q.Schedule(ctx, db, pj, next)
	require.NoError(t, err)
	require.True(t, s.Added)
	require.ErrorIs(t, trU.Commit(), kv.ErrNotCommitted)
	info, err := q.Unschedule(ctx, db, "report")
	require.NoError(t, err)
	require.Equal(t, s.ID, info.ID, "the retry removes the marker of the slot the Schedule added")

	// Unschedule first: the Schedule's commit fails; its retry finds no
	// marker and schedules afresh.
	later := next.Add(time.Hour)
	_, err = q.Schedule(ctx, db, pj, later)
	require.NoError(t, err, "the marker again, for slot %v", later)
	trS, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	r, err := q.Schedule(ctx, trS, pj, later.Add(time.Hour))
	require.NoError(t, err)
	require.True(t, r.Added)
	_, err = q.Unschedule(ctx, db, "report")
	require.NoError(t, err)
	require.ErrorIs(t, trS.Commit(), kv.ErrNotCommitted)
	require.Empty(t, mustSchedules(t, db, q, 10))
}

// A scheduler still running a schedule when it is unscheduled re-creates
// its marker: RunScheduler, which scheduled the slot under way itself,
// adds nothing more in that slot, and at the next slot adds its job and
// writes the marker again. A Schedule of the name in the slot whose job
// was added before the Unschedule finds that job and adds nothing, unless
// the job has left the queue.
func TestUnscheduleWhileSchedulerRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := newDB(t)
	clock := newFakeClock()
	clock.Armed = make(chan time.Duration, 1)
	q := mustJobQueue(t, "unschedule-running", fdbqueue.JobQueueConfig{Clock: clock})
	pj := named("tick", time.Minute, "")
	start := clock.Now()
	done := make(chan error, 1)
	go func() { done <- q.RunScheduler(ctx, db, []fdbqueue.PeriodicJob{pj}) }()

	<-clock.Armed // slot 0 added; asleep until the next minute
	info, err := q.Unschedule(ctx, db, "tick")
	require.NoError(t, err)
	require.True(t, info.Slot.Equal(start))
	require.Empty(t, mustSchedules(t, db, q, 10))
	require.Equal(t, int64(1), mustStats(t, db, q).Queued)

	clock.Advance(time.Minute)
	<-clock.Armed // the next slot scheduled afresh
	all := mustSchedules(t, db, q, 10)
	require.Len(t, all, 1, "the marker is back")
	require.True(t, all[0].Slot.Equal(start.Add(time.Minute)), "slot %v", all[0].Slot)
	require.Equal(t, int64(2), mustStats(t, db, q).Queued)
	cancel()
	require.NoError(t, <-done)

	// A Schedule in a slot already added, after an Unschedule, finds that
	// slot's job by its ID and adds nothing (it used to add a second job:
	// the marker was what said the slot was added), writing no marker.
	ctx = context.Background()
	info, err = q.Unschedule(ctx, db, "tick")
	require.NoError(t, err)
	again, err := q.Schedule(ctx, db, pj, clock.Now())
	require.NoError(t, err)
	require.Equal(t, fdbqueue.ScheduleResult{Slot: start.Add(time.Minute), ID: info.ID}, again)
	require.Equal(t, int64(2), mustStats(t, db, q).Queued)
	require.Empty(t, mustSchedules(t, db, q, 10), "the Unschedule stands")

	// Once that job is acked, nothing tells the slot was added: it is
	// added again.
	ls := mustLease(t, db, q, 10, time.Minute)
	require.Len(t, ls, 2)
	for _, l := range ls {
		require.NoError(t, q.Ack(ctx, db, l))
	}
	again, err = q.Schedule(ctx, db, pj, clock.Now())
	require.NoError(t, err)
	require.True(t, again.Added)
	require.NotEqual(t, info.ID, again.ID)
	require.Equal(t, int64(1), mustStats(t, db, q).Queued)
}

// A marker ahead of the clocks (a scheduler whose clock ran a day ahead)
// stops the schedule until the clocks reach it: Schedule adds nothing,
// and its result says so, with the marker's slot (Ahead; it used to say
// nothing of it); Schedules shows the slot in the future, and after
// Unschedule the next Schedule adds the slot under way.
func TestScheduleMarkerAheadRecoveredByUnschedule(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "schedule-ahead", fdbqueue.JobQueueConfig{Clock: clock})
	pj := hourly("report")
	ahead, err := q.Schedule(ctx, db, pj, clock.Now().Add(24*time.Hour))
	require.NoError(t, err)
	require.True(t, ahead.Added)

	r, err := q.Schedule(ctx, db, pj, time.Time{})
	require.NoError(t, err)
	require.False(t, r.Added, "the marker is later than now's slot")
	require.Equal(t, fdbqueue.ScheduleResult{Slot: clock.Now(), Ahead: ahead.Slot}, r, "the result names the marker's slot")
	same, err := q.Schedule(ctx, db, pj, ahead.Slot.Add(time.Minute))
	require.NoError(t, err)
	require.True(t, same.Ahead.IsZero(), "in the marker's own slot, not ahead: %v", same.Ahead)
	all := mustSchedules(t, db, q, 10)
	require.Len(t, all, 1)
	require.True(t, all[0].Slot.After(clock.Now()), "Schedules shows the slot ahead: %v", all[0].Slot)

	_, err = q.Unschedule(ctx, db, pj.Name)
	require.NoError(t, err)
	r, err = q.Schedule(ctx, db, pj, time.Time{})
	require.NoError(t, err)
	require.True(t, r.Added)
	require.True(t, r.Slot.Equal(clock.Now()))
}

// RunScheduler on a clock behind its schedule's marker (written by a
// scheduler three minutes ahead) logs one Warn line through the queue's
// logger, naming the schedule, the marker's slot and now, and no more at
// its next slots while the marker stays ahead; once the clock reaches the
// marker's slot the schedule adds jobs again, and a marker ahead again
// later is logged again. It used to log nothing: the schedule stopped
// silently.
func TestRunSchedulerWarnsOnceWhileMarkerAhead(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := newDB(t)
	clock := newFakeClock()
	clock.Armed = make(chan time.Duration, 1)
	var logs syncBuffer
	q := mustJobQueue(t, "schedule-ahead-warn", fdbqueue.JobQueueConfig{Clock: clock},
		fdbqueue.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	pj := named("tick", time.Minute, "")
	start := clock.Now()
	_, err := q.Schedule(ctx, db, pj, start.Add(3*time.Minute))
	require.NoError(t, err)
	warnings := func() int { return strings.Count(logs.String(), "marker is ahead") }

	done := make(chan error, 1)
	go func() { done <- q.RunScheduler(ctx, db, []fdbqueue.PeriodicJob{pj}) }()
	<-clock.Armed
	require.Equal(t, 1, warnings(), logs.String())
	line := logs.String()
	require.Contains(t, line, "level=WARN")
	require.Contains(t, line, "schedule=tick")
	const slogTime = "2006-01-02T15:04:05.000Z07:00" // the text handler's form
	require.Contains(t, line, "marker_slot="+start.Add(3*time.Minute).Format(slogTime))
	require.Contains(t, line, "now="+start.Format(slogTime))
	require.Contains(t, line, "ahead_by=3m0s")
	require.Contains(t, line, "fdbqueue.queue=")
	for range 2 {
		clock.Advance(time.Minute)
		<-clock.Armed
	}
	require.Equal(t, 1, warnings(), "once while the marker stays ahead: %s", logs.String())
	require.Equal(t, int64(1), mustStats(t, db, q).Queued, "nothing added while behind")

	clock.Advance(time.Minute) // the marker's own slot: scheduled already
	<-clock.Armed
	clock.Advance(time.Minute)
	<-clock.Armed
	require.Equal(t, int64(2), mustStats(t, db, q).Queued, "the clock passed the marker: a job again")

	_, err = q.Schedule(ctx, db, pj, clock.Now().Add(time.Hour))
	require.NoError(t, err)
	clock.Advance(time.Minute)
	<-clock.Armed
	require.Equal(t, 2, warnings(), "ahead again: logged again: %s", logs.String())
	cancel()
	require.NoError(t, <-done)
}

// A marker another program wrote under a name longer than
// MaxScheduleNameSize, which Schedule refuses, is listed by Schedules and
// removed by Unschedule: every marker listed can be removed. Unschedule
// refused the name with ErrInvalidArgument, so only a raw clear removed it.
func TestUnscheduleNameOverTheLimit(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "unschedule-long", fdbqueue.JobQueueConfig{Clock: clock})
	name := strings.Repeat("n", fdbqueue.MaxScheduleNameSize+1)
	_, err := q.Schedule(ctx, db, hourly(name), clock.Now())
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "Schedule refuses the name")
	_, err = q.Unschedule(ctx, db, name)
	require.ErrorIs(t, err, fdbqueue.ErrScheduleNotFound, "no marker yet")

	id := fdbqueue.JobID{7}
	marker, err := tuple.Tuple{clock.Now().UnixMicro(), id[:], false}.Pack()
	require.NoError(t, err)
	setMarker(t, db, q, name, marker)
	listed := mustSchedules(t, db, q, 10)
	require.Len(t, listed, 1)
	require.Equal(t, name, listed[0].Name)
	require.NoError(t, listed[0].Err)

	got, err := q.Unschedule(ctx, db, name)
	require.NoError(t, err)
	require.Equal(t, listed[0], got, "Unschedule returns what the marker held")
	require.Empty(t, mustSchedules(t, db, q, 10), "the marker is gone")
}

// On a subspace whose prefix leaves room for it, a schedule whose marker
// key is exactly kv.MaxKeySize bytes is scheduled, listed, and pages:
// Schedules after its Key (a cursor at the key limit, whose range read
// begins one byte past it: FDB's getRange bounds a range's keys by the
// system keys only, and truncates its conflict range's past the limit,
// fdbclient/ReadYourWrites.actor.cpp) lists what follows, nothing here;
// Unschedule removes it. A name whose marker key is one byte longer fails
// with ErrInvalidArgument and kv.ErrKeyTooLarge.
func TestSchedulesMarkerKeyAtTheKeyLimit(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	name := strings.Repeat("n", fdbqueue.MaxScheduleNameSize)
	// ("p", name) packs to 0x02 'p' 0x00 0x02 name 0x00.
	prefix := []byte(strings.Repeat("L", kv.MaxKeySize-len(name)-5))
	q, err := fdbqueue.NewJobQueue(fdbqueue.SubspaceFromBytes(prefix), fdbqueue.JobQueueConfig{Clock: clock})
	require.NoError(t, err)
	require.Len(t, markerKey(t, q, name), kv.MaxKeySize)

	r, err := q.Schedule(ctx, db, hourly(name), clock.Now())
	require.NoError(t, err, "a marker key at the limit")
	require.True(t, r.Added)
	all, err := q.Schedules(ctx, db, nil, 10)
	require.NoError(t, err)
	require.Equal(t, []fdbqueue.ScheduleInfo{{Name: name, Slot: r.Slot.UTC(), ID: r.ID, Key: markerKey(t, q, name)}}, all)
	page, err := q.Schedules(ctx, db, all[0].Key, 10)
	require.NoError(t, err, "after a Key at the key limit")
	require.Empty(t, page)
	info, err := q.Unschedule(ctx, db, name)
	require.NoError(t, err)
	require.Equal(t, all[0], info)

	over := name[1:] + "\x00" // as long, but its 0x00 packs to two bytes
	require.Len(t, markerKey(t, q, over), kv.MaxKeySize+1)
	_, err = q.Schedule(ctx, db, hourly(over), clock.Now())
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "a marker key one byte over")
	require.ErrorIs(t, err, kv.ErrKeyTooLarge)
}
