package sim

import (
	"reflect"
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// setInt sets the int field name of the struct *p to v.
func setInt(t *testing.T, p any, name string, v int) {
	t.Helper()
	f := reflect.ValueOf(p).Elem().FieldByName(name)
	require.True(t, f.IsValid() && f.Kind() == reflect.Int, "no int field %s", name)
	f.SetInt(int64(v))
}

// intFields returns the names of the int fields of the struct *p.
func intFields(p any) []string {
	var names []string
	v := reflect.ValueOf(p).Elem()
	for i := range v.NumField() {
		if v.Field(i).Kind() == reflect.Int {
			names = append(names, v.Type().Field(i).Name)
		}
	}
	return names
}

// requireOKOf checks an OK method over every int field of a result
// (made by fresh): each field of mustBeZero set alone fails it; the jobs
// added balance only with one of summands, each alone accounting for
// them; any other field is a figure that fails nothing.
func requireOKOf(t *testing.T, fresh func() any, ok func(any) bool, mustBeZero, summands []string) {
	t.Helper()
	require.True(t, ok(fresh()), "a zero result")
	for _, name := range intFields(fresh()) {
		r := fresh()
		switch {
		case name == "Added":
			setInt(t, r, name, 1)
			require.False(t, ok(r), "a job added and never accounted for")
		case slices.Contains(mustBeZero, name):
			setInt(t, r, name, 1)
			require.False(t, ok(r), "%s is a violation", name)
		case slices.Contains(summands, name):
			setInt(t, r, "Added", 1)
			setInt(t, r, name, 1)
			require.True(t, ok(r), "an added job %s is accounted for", name)
			setInt(t, r, "Added", 2)
			require.False(t, ok(r), "two added jobs, one %s, the other unaccounted for", name)
			setInt(t, r, "Added", 0)
			require.False(t, ok(r), "a job %s that was never added", name)
		default:
			setInt(t, r, name, 1)
			require.True(t, ok(r), "%s is a figure, not a violation", name)
		}
	}
}

// LeaseResult.OK fails on every violation its documentation names, on a
// history that is not linearizable or whose check was undecided, and on
// jobs added that are not accounted for exactly once.
func TestLeaseResultOK(t *testing.T) {
	fresh := func() any { return &LeaseResult{Check: porcupine.Ok} }
	ok := func(r any) bool { return r.(*LeaseResult).OK() }
	requireOKOf(t, fresh, ok,
		[]string{"AckedTwice", "AckedAndDead", "Lost", "Duplicated", "DeadAttempts", "KeysHeld", "CancelledAndAcked", "CancelledAndDead",
			"CancelledTwice", "JobInvalid", "Leftovers", "CountErrors", "DeletedTwice", "DeletedAndRemoved", "TrustedAdded",
			"ValueMismatches", "BudgetErrors"},
		[]string{"Acked", "Dead", "Cancelled", "Deleted", "AckedAbandoned", "CancelledAbandoned", "DeletedAbandoned"})
	for _, c := range []porcupine.CheckResult{porcupine.Illegal, porcupine.Unknown} {
		require.False(t, LeaseResult{Check: c}.OK(), "check %v", c)
	}
}

// PoolResult.OK fails on every violation its documentation names and on
// jobs added that are not accounted for exactly once.
func TestPoolResultOK(t *testing.T) {
	fresh := func() any { return &PoolResult{} }
	ok := func(r any) bool { return r.(*PoolResult).OK() }
	requireOKOf(t, fresh, ok,
		[]string{"AckedTwice", "AckedAndDead", "Lost", "Hidden", "NotDueAtCycle", "AttemptBurned", "NotDue", "ReleasedGone", "FailedCut",
			"LateAcked", "DeadAttempts", "RunErrors", "LeasedAfterCancel", "SettledAfterCancel", "LostUncancelled", "ExtendedAfterCancel",
			"CancelledAndAcked", "CancelledAndDead", "CancelledTwice", "Leftovers", "CountErrors",
			"HeldLeaseLost", "HeldLeaseExpired", "HeldAttemptsGrew", "HeldContextEnded", "HeldDeadlineWrong"},
		[]string{"Acked", "Dead", "Cancelled", "AckedUnknown"})
}

// Result.OK fails on each kind of problem a run counts; the other
// figures (an undecided check among them) fail nothing.
func TestResultOK(t *testing.T) {
	fresh := func() any { return &Result{} }
	ok := func(r any) bool { return r.(*Result).OK() }
	requireOKOf(t, fresh, ok, []string{"Violations", "Lost", "Duplicated", "Phantom", "DrainDiffers", "Unexpected"}, nil)
}

// Result.Add sums every figure (the tests require a sum of seeds' results
// sound: a figure Add dropped would go unchecked) and the database's
// counters, and keeps the first failure.
func TestResultAdd(t *testing.T) {
	var o Result
	for i, name := range intFields(&o) {
		setInt(t, &o, name, i+1)
	}
	sv := reflect.ValueOf(&o.Stats).Elem()
	live := []string{"Watches", "CommitsInFlight", "Keys", "Versions", "ConflictHistory", "GCQueue", "Version", "OldestVersion"}
	for i := range sv.NumField() {
		if sv.Field(i).Kind() == reflect.Int64 {
			sv.Field(i).SetInt(int64(i + 1))
		}
	}
	first := &Failure{Reason: "first"}
	o.Failure = first
	var r Result
	r.Add(o)
	r.Add(Result{Failure: &Failure{Reason: "second"}})
	r.Add(o)
	for i, name := range intFields(&r) {
		require.Equal(t, int64(2*(i+1)), reflect.ValueOf(r).FieldByName(name).Int(), name)
	}
	rv := reflect.ValueOf(r.Stats)
	for i := range rv.NumField() {
		if rv.Field(i).Kind() != reflect.Int64 {
			continue
		}
		want := int64(2 * (i + 1))
		if slices.Contains(live, rv.Type().Field(i).Name) {
			want = int64(i + 1)
		}
		require.Equal(t, want, rv.Field(i).Int(), "Stats.%s", rv.Type().Field(i).Name)
	}
	require.Same(t, first, r.Failure)
}
