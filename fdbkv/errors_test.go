package fdbkv_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue/fdbkv"
	"github.com/fdbqueue/fdbqueue/kv"
)

// These tests exercise fdbkv's pure-Go logic. fdb.Error is a plain struct,
// so building one calls nothing in libfdb_c; only fdb.Error.Error() does
// (it asks the library for the code's description), and these tests call
// it only where the expected text does not depend on the library.

func TestTranslateErrorKeepsCode(t *testing.T) {
	for _, tc := range []struct {
		code      int
		sentinel  kv.Error
		retryable bool
		maybe     bool
	}{
		{1007, kv.ErrTransactionTooOld, true, false},
		{1009, kv.ErrFutureVersion, true, false},
		{1020, kv.ErrNotCommitted, true, false},
		{1021, kv.ErrCommitUnknownResult, true, true},
		{1025, kv.ErrTransactionCancelled, false, false},
		{1031, kv.ErrTransactionTimedOut, false, false},
		{1032, kv.ErrTooManyWatches, false, false},
		{1037, kv.ErrProcessBehind, true, false},
		{1213, kv.ErrTagThrottled, true, false},
		{2004, kv.ErrKeyOutsideLegalRange, false, false},
		{2005, kv.ErrInvertedRange, false, false},
		{2101, kv.ErrTransactionTooLarge, false, false},
		{2102, kv.ErrKeyTooLarge, false, false},
		{2103, kv.ErrValueTooLarge, false, false},
	} {
		t.Run(tc.sentinel.Error(), func(t *testing.T) {
			err := fdbkv.TranslateError(fdb.Error{Code: tc.code})
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("errors.Is(%v, %v) = false, want true", err, tc.sentinel)
			}
			var ke kv.Error
			if !errors.As(err, &ke) || ke.Code != tc.code {
				t.Errorf("errors.As(err, *kv.Error) gave code %d, want %d", ke.Code, tc.code)
			}
			var fe fdb.Error
			if !errors.As(err, &fe) || fe.Code != tc.code {
				t.Errorf("errors.As(err, *fdb.Error) gave code %d, want %d", fe.Code, tc.code)
			}
			if got := kv.IsRetryable(err); got != tc.retryable {
				t.Errorf("kv.IsRetryable = %v, want %v", got, tc.retryable)
			}
			if got := kv.MaybeCommitted(err); got != tc.maybe {
				t.Errorf("kv.MaybeCommitted = %v, want %v", got, tc.maybe)
			}
			if got, want := err.Error(), tc.sentinel.Error(); got != want {
				t.Errorf("Error() = %q, want kv's text %q", got, want)
			}
		})
	}
}

// fdbErrorCodes are the error codes of FoundationDB 7.3
// (flow/include/flow/error_definitions.h) a client can see: every code of
// fdb_error_predicate's classes (bindings/c/fdb_c.cpp), the cancellation
// and timeout codes, client errors and a few the adapter itself reports.
var fdbErrorCodes = []int{
	1000, 1004, 1007, 1009, 1020, 1021, 1022, 1025, 1029, 1031, 1032, 1034,
	1036, 1037, 1038, 1039, 1040, 1042, 1051, 1078, 1101, 1102, 1213, 1223,
	1510, 1511, 1515, 1516, 2000, 2004, 2005, 2006, 2008, 2017, 2020, 2101,
	2102, 2103, 2104, 2200, 2201, 2203, 2210, 4000, 4100,
}

// TestEveryCodeReachesCallersAsKVError: whatever the code, a binding error
// becomes a kv.Error of that code, so kv's predicates (IsRetryable,
// MaybeCommitted) classify it exactly as they classify kv.Error{Code}: fdbkv
// has no table of codes of its own to fall behind kv's.
func TestEveryCodeReachesCallersAsKVError(t *testing.T) {
	for _, code := range fdbErrorCodes {
		bare := kv.Error{Code: code}
		for _, in := range []error{fdb.Error{Code: code}, fmt.Errorf("app: %w", fdb.Error{Code: code})} {
			err := fdbkv.TranslateError(in)
			var ke kv.Error
			if !errors.As(err, &ke) || ke.Code != code || !errors.Is(err, bare) {
				t.Errorf("%d: TranslateError(%#v) = %#v, which is not kv.Error{%d}", code, in, err, code)
				continue
			}
			var fe fdb.Error
			if !errors.As(err, &fe) || fe.Code != code {
				t.Errorf("%d: the translated error lost its fdb.Error", code)
			}
			if got, want := kv.IsRetryable(err), kv.IsRetryable(bare); got != want {
				t.Errorf("%d: kv.IsRetryable = %v on FDB, %v for kv.Error", code, got, want)
			}
			if got, want := kv.MaybeCommitted(err), kv.MaybeCommitted(bare); got != want {
				t.Errorf("%d: kv.MaybeCommitted = %v on FDB, %v for kv.Error", code, got, want)
			}
		}
		// A commit's error keeps the code too; a sent commit interrupted by
		// cancellation, timeout or an operation during it is maybe
		// committed, and no other code gains that mark.
		cerr := fdbkv.CommitError(fdb.Error{Code: code})
		if !errors.Is(cerr, bare) {
			t.Errorf("%d: CommitError = %v, which is not kv.Error{%d}", code, cerr, code)
		}
		interrupted := code == 1025 || code == 1031 || code == 2017
		if got, want := kv.MaybeCommitted(cerr), interrupted || kv.MaybeCommitted(bare); got != want {
			t.Errorf("%d: kv.MaybeCommitted of a sent commit failing with it = %v, want %v", code, got, want)
		}
	}
}

func TestTranslateErrorOtherErrors(t *testing.T) {
	if err := fdbkv.TranslateError(nil); err != nil {
		t.Errorf("TranslateError(nil) = %v, want nil", err)
	}
	plain := errors.New("application error")
	if err := fdbkv.TranslateError(plain); err != plain {
		t.Errorf("TranslateError(plain) = %v, want the same error back", err)
	}
	kvErr := fmt.Errorf("layer: %w", kv.ErrNotCommitted)
	if err := fdbkv.TranslateError(kvErr); err != kvErr {
		t.Errorf("TranslateError(error wrapping kv.Error) = %v, want the same error back", err)
	}
	once := fdbkv.TranslateError(fdb.Error{Code: 1020})
	if twice := fdbkv.TranslateError(once); twice != once {
		t.Errorf("TranslateError is not idempotent: %v became %v", once, twice)
	}
	// An fdb.Error wrapped by the application keeps its context.
	wrapped := fdbkv.TranslateError(fmt.Errorf("enqueue: %w", fdb.Error{Code: 1021}))
	if !errors.Is(wrapped, kv.ErrCommitUnknownResult) || !kv.MaybeCommitted(wrapped) {
		t.Errorf("wrapped fdb.Error{1021} translated to %v, which does not match kv.ErrCommitUnknownResult", wrapped)
	}
	if !strings.HasPrefix(wrapped.Error(), "enqueue: ") {
		t.Errorf("wrapped error text %q lost the application's context", wrapped.Error())
	}
	// A code kv has no sentinel for keeps its number.
	unknown := fdbkv.TranslateError(fdb.Error{Code: 2210})
	var ke kv.Error
	if !errors.As(unknown, &ke) || ke.Code != 2210 || kv.IsRetryable(unknown) {
		t.Errorf("fdb.Error{2210} translated to code %d (retryable %v), want 2210, not retryable", ke.Code, kv.IsRetryable(unknown))
	}
}

func TestErrorCode(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   int
		hasFDB bool
	}{
		{fdb.Error{Code: 1020}, 1020, true},
		{kv.ErrTransactionTooOld, 1007, true},
		{fmt.Errorf("x: %w", fdb.Error{Code: 1009}), 1009, true},
		{kv.CommitInterrupted(kv.ErrTransactionCancelled), 1025, true},
		{errors.New("plain"), 0, false},
		{nil, 0, false},
	} {
		code, ok := fdbkv.ErrorCode(tc.err)
		if code != tc.code || ok != tc.hasFDB {
			t.Errorf("ErrorCode(%#v) = %d, %v; want %d, %v", tc.err, code, ok, tc.code, tc.hasFDB)
		}
	}
}

func TestCommitErrorMarksInterruptedCommits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		is    error
		maybe bool
	}{
		{"success", nil, nil, false},
		{"conflict", fdb.Error{Code: 1020}, kv.ErrNotCommitted, false},
		{"unknown result", fdb.Error{Code: 1021}, kv.ErrCommitUnknownResult, true},
		{"cancelled in flight", fdb.Error{Code: 1025}, kv.ErrTransactionCancelled, true},
		{"timed out in flight", fdb.Error{Code: 1031}, kv.ErrTransactionTimedOut, true},
		// A read or write issued during the commit fails it with
		// used_during_commit while the sent commit goes on
		// (ReadYourWritesTransaction::checkUsedDuringCommit, RYWImpl::commit).
		{"operation during the commit", fdb.Error{Code: 2017}, kv.ErrUsedDuringCommit, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// CommitError sees only commits that were sent; a transaction
			// cancelled before Commit sends none (txstate_test.go).
			err := fdbkv.CommitError(tc.err)
			if tc.is == nil {
				if err != nil {
					t.Fatalf("CommitError(nil) = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("CommitError gave %v, which does not match %v", err, tc.is)
			}
			if got := kv.MaybeCommitted(err); got != tc.maybe {
				t.Errorf("kv.MaybeCommitted(%v) = %v, want %v", err, got, tc.maybe)
			}
		})
	}
}

func TestWatchError(t *testing.T) {
	if err := fdbkv.WatchError(nil, true, nil); err != nil {
		t.Errorf("WatchError(nil) = %v, want nil", err)
	}
	// FDB fails a cancelled future with operation_cancelled (1101).
	if err := fdbkv.WatchError(fdb.Error{Code: 1101}, true, nil); !errors.Is(err, kv.ErrTransactionCancelled) {
		t.Errorf("cancelled watch gave %v, want kv.ErrTransactionCancelled", err)
	}
	if err := fdbkv.WatchError(fdb.Error{Code: 1025}, true, nil); !errors.Is(err, kv.ErrTransactionCancelled) {
		t.Errorf("cancelled watch gave %v, want kv.ErrTransactionCancelled", err)
	}
	// Like every error of the binding, it keeps an fdb.Error (doc.go).
	var fe fdb.Error
	if err := fdbkv.WatchError(fdb.Error{Code: 1101}, true, nil); !errors.As(err, &fe) || fe.Code != 1025 {
		t.Errorf("cancelled watch gave %v, want an fdb.Error of code 1025 in its chain", err)
	}
	// A watch whose transaction failed to commit reports that failure.
	if err := fdbkv.WatchError(fdb.Error{Code: 1020}, false, nil); !errors.Is(err, kv.ErrNotCommitted) {
		t.Errorf("watch of a conflicting transaction gave %v, want kv.ErrNotCommitted", err)
	}
	if err := fdbkv.WatchError(fdb.Error{Code: 1032}, true, nil); !errors.Is(err, kv.ErrTooManyWatches) {
		t.Errorf("a watch that failed before Cancel gave %v, want its own error kv.ErrTooManyWatches", err)
	}
	// The multi-version client fails a watch with cluster_version_changed
	// when it switches client library (AbortableSingleAssignmentVar::fire):
	// a spurious fire, which kv.Watch.Wait allows, not an error.
	for _, cancelled := range []bool{false, true} {
		for _, in := range []error{fdb.Error{Code: 1039}, fdbkv.TranslateError(fdb.Error{Code: 1039}), kv.ErrClusterVersionChanged} {
			if err := fdbkv.WatchError(in, cancelled, nil); err != nil {
				t.Errorf("WatchError(%#v, cancelled %v) = %v, want nil (a spurious fire)", in, cancelled, err)
			}
		}
	}
	// A watch fdbkv failed for its transaction (its commit failed before
	// FDB's native commit ran, or it was cancelled) reports the
	// transaction's error; its owner's Cancel still wins, and an error
	// FDB gave the watch itself is kept.
	tooLarge := fdbkv.TranslateError(fdb.Error{Code: 2102})
	if err := fdbkv.WatchError(fdb.Error{Code: 1101}, false, tooLarge); err != tooLarge {
		t.Errorf("watch failed for its transaction's key_too_large gave %v, want that error", err)
	}
	if err := fdbkv.WatchError(fdb.Error{Code: 1101}, true, tooLarge); !errors.Is(err, kv.ErrTransactionCancelled) {
		t.Errorf("watch cancelled by its owner and failed for its transaction gave %v, want kv.ErrTransactionCancelled", err)
	}
	if err := fdbkv.WatchError(fdb.Error{Code: 1020}, false, tooLarge); !errors.Is(err, kv.ErrNotCommitted) {
		t.Errorf("watch FDB failed with not_committed gave %v, want kv.ErrNotCommitted", err)
	}
	// Only that code: commit_unknown_result, the other maybe-committed
	// error, still fails the watch.
	if err := fdbkv.WatchError(fdb.Error{Code: 1021}, false, nil); !errors.Is(err, kv.ErrCommitUnknownResult) {
		t.Errorf("watch of a commit with an unknown result gave %v, want kv.ErrCommitUnknownResult", err)
	}
}

func TestRangeOptions(t *testing.T) {
	for _, tc := range []struct {
		in   kv.RangeOptions
		want fdb.RangeOptions
	}{
		{kv.RangeOptions{}, fdb.RangeOptions{Mode: fdb.StreamingModeIterator}},
		{kv.RangeOptions{Limit: 5, Reverse: true}, fdb.RangeOptions{Limit: 5, Reverse: true, Mode: fdb.StreamingModeIterator}},
		{kv.RangeOptions{Mode: kv.StreamingModeWantAll}, fdb.RangeOptions{Mode: fdb.StreamingModeWantAll}},
		{kv.RangeOptions{Limit: 3, Mode: kv.StreamingModeExact}, fdb.RangeOptions{Limit: 3, Mode: fdb.StreamingModeExact}},
		{kv.RangeOptions{Mode: kv.StreamingModeExact}, fdb.RangeOptions{Mode: fdb.StreamingModeWantAll}},
		{kv.RangeOptions{Mode: kv.StreamingMode(42)}, fdb.RangeOptions{Mode: fdb.StreamingModeIterator}},
		// Limits the binding's C int cannot hold are no limit (the
		// binding would wrap them: 2^31 to a negative limit).
		{kv.RangeOptions{Limit: math.MaxInt32}, fdb.RangeOptions{Limit: math.MaxInt32, Mode: fdb.StreamingModeIterator}},
		{kv.RangeOptions{Limit: math.MaxInt32 + 1}, fdb.RangeOptions{Mode: fdb.StreamingModeIterator}},
		{kv.RangeOptions{Limit: math.MaxInt64, Mode: kv.StreamingModeExact}, fdb.RangeOptions{Mode: fdb.StreamingModeWantAll}},
	} {
		if got := fdbkv.RangeOptions(tc.in); got != tc.want {
			t.Errorf("RangeOptions(%+v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// TestOptionValues: the option values are checked in Go, against the
// ranges of FDB's extractIntOption calls (ReadYourWritesTransaction::
// setOptionImpl for timeout and retry_limit, Transaction::setOption for
// max_retry_delay), because libfdb_c defers the error of a bad value to
// the transaction's next operation (ThreadSafeTransaction::setOption).
func TestOptionValues(t *testing.T) {
	requireInvalid := func(t *testing.T, err error, what string) {
		t.Helper()
		var fe fdb.Error
		if !errors.Is(err, kv.ErrInvalidOptionValue) || !errors.As(err, &fe) || fe.Code != 2006 {
			t.Errorf("%s: %v, want invalid_option_value (2006) as kv.Error and fdb.Error", what, err)
		}
	}
	maxMillis := time.Duration(math.MaxInt32) * time.Millisecond
	for _, tc := range []struct {
		in   time.Duration
		want int64
	}{
		{0, 0},
		{time.Nanosecond, 1},
		{999 * time.Microsecond, 1},
		{1500 * time.Microsecond, 1},
		{2 * time.Second, 2000},
		{maxMillis, math.MaxInt32},
		{maxMillis + time.Millisecond - time.Nanosecond, math.MaxInt32}, // whole milliseconds, as memdb counts
	} {
		got, err := fdbkv.OptionMillis("max retry delay", tc.in)
		if err != nil || got != tc.want {
			t.Errorf("OptionMillis(%v) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	// A timeout is rounded up: kv cancels the transaction once d has
	// elapsed, not before, and FDB's timer fires at the milliseconds it
	// gets (timebomb, fdbclient/ReadYourWrites.actor.cpp). The old adapter
	// sent 1.5 ms as 1 ms.
	for _, tc := range []struct {
		in   time.Duration
		want int64
	}{
		{0, 0},
		{time.Nanosecond, 1},
		{999 * time.Microsecond, 1},
		{time.Millisecond, 1},
		{1500 * time.Microsecond, 2},
		{2*time.Second + time.Nanosecond, 2001},
		{maxMillis, math.MaxInt32},
		{maxMillis + time.Millisecond - time.Nanosecond, math.MaxInt32}, // accepted, as memdb accepts it: FDB's largest
	} {
		got, err := fdbkv.TimeoutMillis(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("TimeoutMillis(%v) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, d := range []time.Duration{-time.Nanosecond, -time.Second, maxMillis + time.Millisecond, time.Duration(math.MaxInt64)} {
		_, err := fdbkv.OptionMillis("timeout", d)
		requireInvalid(t, err, fmt.Sprintf("OptionMillis(%v)", d))
		_, err = fdbkv.TimeoutMillis(d)
		requireInvalid(t, err, fmt.Sprintf("TimeoutMillis(%v)", d))
	}
	for _, n := range []int{-1, 0, 1, 100, math.MaxInt32} {
		if got, err := fdbkv.RetryLimitValue(n); err != nil || got != int64(n) {
			t.Errorf("RetryLimitValue(%d) = %d, %v; want %d", n, got, err, n)
		}
	}
	bad := []int{-2, math.MinInt32}
	if math.MaxInt > math.MaxInt32 { // a 64-bit int can go over FDB's range
		over := int64(math.MaxInt32) + 1
		bad = append(bad, int(over), math.MaxInt)
	}
	for _, n := range bad {
		_, err := fdbkv.RetryLimitValue(n)
		requireInvalid(t, err, fmt.Sprintf("RetryLimitValue(%d)", n))
	}
}

func TestAPIVersionChecks(t *testing.T) {
	// Asking for too old a version fails before any call into libfdb_c.
	_, err := fdbkv.OpenWithAPIVersion(620, "")
	var ave *fdbkv.APIVersionError
	if !errors.As(err, &ave) || ave.Selected != 620 || ave.Min != fdbkv.MinAPIVersion {
		t.Errorf("OpenWithAPIVersion(620) = %v, want *APIVersionError{Selected: 620, Min: %d}", err, fdbkv.MinAPIVersion)
	}
	if fdb.IsAPIVersionSelected() {
		// Another test of this binary selected a version already (one with
		// a cluster); what follows needs none selected.
		return
	}
	if err := fdbkv.CheckAPIVersion(); !errors.As(err, &ave) || ave.Selected != 0 {
		t.Errorf("CheckAPIVersion() with no version selected = %v, want *APIVersionError{Selected: 0}", err)
	}
	if _, err := fdbkv.Open(""); !errors.As(err, &ave) {
		t.Errorf("Open with no API version selected = %v, want *APIVersionError", err)
	}
}

// bindingRetryLoop is the decision of the binding's retry loop (retryable
// in bindings/go/src/fdb/database.go, at the commit go.mod pins): it
// retries an error only if errors.As finds an fdb.Error in its chain and
// onError of that error succeeds, and otherwise returns the error. onError
// here answers as FDB does for the code's retryability (kv.IsRetryable is
// FDB's RETRYABLE predicate), with no transaction behind it.
func bindingRetryLoop(t *testing.T, attempt func() error) (attempts int, err error) {
	t.Helper()
	for attempts = 1; attempts <= 10; attempts++ {
		err = attempt()
		if err == nil {
			return attempts, nil
		}
		var ep fdb.Error
		if !errors.As(err, &ep) {
			return attempts, err // fatal to the binding
		}
		if !kv.IsRetryable(kv.Error{Code: ep.Code}) {
			return attempts, err // onError gives the same code back
		}
	}
	t.Fatalf("the loop ran 10 attempts; last error %v", err)
	return attempts, err
}

// TestWrapTransactionErrorsReachTheBindingsLoop: an error a layer makes
// itself around a kv.Error (fdbqueue's errConfigMoved wraps
// kv.ErrNotCommitted) and returns from Transact or ReadTransact of a
// wrapped transaction carries an fdb.Error of the same code, so that the
// binding's fdb.Database.Transact retries it, and keeps its text and chain.
// The wrapper of a zero fdb.Transaction (made without WrapTransaction's
// check for it) suffices: Transact calls nothing in libfdb_c.
func TestWrapTransactionErrorsReachTheBindingsLoop(t *testing.T) {
	ctx := t.Context()
	layerConflict := fmt.Errorf("fdbqueue: stored configuration changed during the operation: %w", kv.ErrNotCommitted)
	tr := fdbkv.WrapHandle(fdb.Transaction{})
	for name, run := range map[string]func(error) error{
		"Transact": func(e error) error {
			return tr.Transact(ctx, func(kv.Transaction) error { return e })
		},
		"ReadTransact": func(e error) error {
			return tr.ReadTransact(ctx, func(kv.ReadTransaction) error { return e })
		},
		"Snapshot().ReadTransact": func(e error) error {
			return tr.Snapshot().ReadTransact(ctx, func(kv.ReadTransaction) error { return e })
		},
		"nested Transact, wrapped by the layer": func(e error) error {
			return tr.Transact(ctx, func(inner kv.Transaction) error {
				if err := inner.Transact(ctx, func(kv.Transaction) error { return e }); err != nil {
					return fmt.Errorf("enqueue: %w", err)
				}
				return nil
			})
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := run(layerConflict)
			var fe fdb.Error
			if !errors.As(err, &fe) || fe.Code != 1020 {
				t.Errorf("errors.As(%v, *fdb.Error) gave code %d, want 1020", err, fe.Code)
			}
			var ke kv.Error
			if !errors.As(err, &ke) || ke.Code != 1020 {
				t.Errorf("errors.As(err, *kv.Error) gave code %d, want 1020", ke.Code)
			}
			if !errors.Is(err, layerConflict) || !errors.Is(err, kv.ErrNotCommitted) || !kv.IsRetryable(err) {
				t.Errorf("%v lost its chain: Is(layer error) %v, Is(kv.ErrNotCommitted) %v, kv.IsRetryable %v",
					err, errors.Is(err, layerConflict), errors.Is(err, kv.ErrNotCommitted), kv.IsRetryable(err))
			}
			if !strings.HasSuffix(err.Error(), layerConflict.Error()) {
				t.Errorf("text %q, want the layer's %q", err.Error(), layerConflict.Error())
			}

			// The binding's loop retries it; the second attempt succeeds.
			first := true
			attempts, err := bindingRetryLoop(t, func() error {
				if first {
					first = false
					return run(layerConflict)
				}
				return run(nil)
			})
			if err != nil || attempts != 2 {
				t.Errorf("the binding's loop: %d attempts, %v; want a retry, then success", attempts, err)
			}

			// A layer error of a non-retryable code stops the loop with the
			// same error, as onError of that code does.
			tooLarge := fmt.Errorf("fdbqueue: item too large: %w", kv.ErrValueTooLarge)
			attempts, err = bindingRetryLoop(t, func() error { return run(tooLarge) })
			if attempts != 1 || !errors.Is(err, tooLarge) || !errors.Is(err, kv.ErrValueTooLarge) {
				t.Errorf("the binding's loop with a non-retryable layer error: %d attempts, %v", attempts, err)
			}
		})
	}

	// Errors without a code, errors that already hold an fdb.Error and nil
	// pass unchanged; so does the context's error.
	plain := errors.New("application error")
	if err := tr.Transact(ctx, func(kv.Transaction) error { return plain }); err != plain {
		t.Errorf("Transact with a plain error = %v, want it unchanged", err)
	}
	translated := fdbkv.TranslateError(fdb.Error{Code: 1020})
	if err := tr.Transact(ctx, func(kv.Transaction) error { return translated }); err != translated {
		t.Errorf("Transact with a translated binding error = %v, want it unchanged", err)
	}
	if err := tr.Transact(ctx, func(kv.Transaction) error { return nil }); err != nil {
		t.Errorf("Transact with nil = %v", err)
	}
	if err := fdbkv.BindingError(nil); err != nil {
		t.Errorf("BindingError(nil) = %v", err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := tr.Transact(ended, func(kv.Transaction) error { return layerConflict }); !errors.Is(err, context.Canceled) {
		t.Errorf("Transact with an ended context = %v, want context.Canceled", err)
	}
}

// TestNegativeLimitFailsBeforeFDB: a negative range limit fails with
// range_limits_invalid (kv.RangeOptions.Limit) without reaching the
// binding, where -1 would mean "unlimited".
func TestNegativeLimitFailsBeforeFDB(t *testing.T) {
	_, err := fdbkv.InvalidLimit.GetSlice()
	var fe fdb.Error
	if !errors.Is(err, kv.ErrRangeLimitsInvalid) || !errors.As(err, &fe) || fe.Code != 2012 {
		t.Errorf("GetSlice = %v, want range_limits_invalid (2012) as kv.Error and fdb.Error", err)
	}
	it := fdbkv.InvalidLimit.Iterator()
	if it.Next() || !errors.Is(it.Err(), kv.ErrRangeLimitsInvalid) {
		t.Errorf("Iterator: Next or Err = %v, want no pair and range_limits_invalid", it.Err())
	}
}

func TestClip(t *testing.T) {
	// Slices the binding's C int lengths cannot hold are cut to a prefix
	// that is over every size limit of FDB's, as they are.
	if fdbkv.ClipTo <= 30_000 || fdbkv.ClipTo <= kv.MaxValueSize { // SYSTEM_KEY_SIZE_LIMIT, VALUE_SIZE_LIMIT
		t.Fatalf("clipTo %d is within FDB's size limits", fdbkv.ClipTo)
	}
	small := []byte("0123456789")
	if got := fdbkv.ClipOver(small, 10); len(got) != 10 {
		t.Errorf("a slice within the bound became %d bytes", len(got))
	}
	long := make([]byte, fdbkv.ClipTo+2)
	if got := fdbkv.ClipOver(long, fdbkv.ClipTo+1); len(got) != fdbkv.ClipTo || &got[0] != &long[0] {
		t.Errorf("a slice over the bound became %d bytes, want its first %d", len(got), fdbkv.ClipTo)
	}
	if got := fdbkv.ClipOver(small[:5], 4); len(got) != 5 {
		t.Errorf("a slice over the bound but shorter than the prefix became %d bytes, want it whole", len(got))
	}
}
