package kv

import (
	"errors"
	"fmt"
)

// Error is a FoundationDB error: a numeric code with FDB's meaning. Backends
// translate their native errors into an Error (usually wrapped with detail)
// in one place, so callers test errors the same way on every backend:
//
//	if errors.Is(err, kv.ErrNotCommitted) { ... }
//	var e kv.Error; if errors.As(err, &e) { log(e.Code) }
type Error struct {
	// Code is FoundationDB's error code, e.g. 1020 for not_committed.
	Code int
}

// Error returns FDB's name for the code and the code itself.
func (e Error) Error() string {
	if name, ok := errorNames[e.Code]; ok {
		return fmt.Sprintf("%s (%d)", name, e.Code)
	}
	return fmt.Sprintf("fdb error %d", e.Code)
}

// Sentinel errors, one per FDB code that this project's code or its callers
// distinguish. Compare with errors.Is.
var (
	ErrTransactionTooOld    = Error{Code: 1007} // read version older than the MVCC window (5 s)
	ErrFutureVersion        = Error{Code: 1009} // storage not yet at the read version
	ErrNotCommitted         = Error{Code: 1020} // conflict: a key read was written by a later commit
	ErrCommitUnknownResult  = Error{Code: 1021} // the commit may or may not have been applied
	ErrTransactionCancelled = Error{Code: 1025} // Cancel was called (or the context ended)
	ErrTransactionTimedOut  = Error{Code: 1031} // the timeout option expired
	ErrTooManyWatches       = Error{Code: 1032} // the database's watch limit was reached
	ErrWatchesDisabled      = Error{Code: 1034} // watches are disabled on this transaction
	ErrProcessBehind        = Error{Code: 1037} // a storage server is behind
	ErrTagThrottled         = Error{Code: 1213} // the transaction's tag is throttled
	ErrUsedDuringCommit     = Error{Code: 2017} // an operation ran while a commit was in flight
	ErrKeyOutsideLegalRange = Error{Code: 2004} // a key at or above \xff without system access
	ErrInvertedRange        = Error{Code: 2005} // a range whose begin is after its end
	ErrTransactionTooLarge  = Error{Code: 2101} // over 10,000,000 bytes of affected data
	ErrKeyTooLarge          = Error{Code: 2102} // a key over 10,000 bytes
	ErrValueTooLarge        = Error{Code: 2103} // a value over 100,000 bytes
	ErrClientInvalidOp      = Error{Code: 2000} // an operation not valid in this state
	ErrInternal             = Error{Code: 4100} // an internal error of the backend
)

var errorNames = map[int]string{
	1007: "transaction_too_old",
	1009: "future_version",
	1020: "not_committed",
	1021: "commit_unknown_result",
	1025: "transaction_cancelled",
	1031: "transaction_timed_out",
	1032: "too_many_watches",
	1034: "watches_disabled",
	1037: "process_behind",
	1213: "tag_throttled",
	2000: "client_invalid_operation",
	2004: "key_outside_legal_range",
	2005: "inverted_range",
	2017: "used_during_commit",
	2101: "transaction_too_large",
	2102: "key_too_large",
	2103: "value_too_large",
	4100: "internal_error",
}

// Limits of FoundationDB that every backend enforces.
const (
	MaxKeySize         = 10_000     // bytes; larger keys fail with ErrKeyTooLarge
	MaxValueSize       = 100_000    // bytes; larger values fail with ErrValueTooLarge
	MaxTransactionSize = 10_000_000 // bytes; larger commits fail with ErrTransactionTooLarge
)

// retryableCodes are the codes the standard retry loop retries. 1021 is
// among them although its commit may have applied: see MaybeCommitted.
var retryableCodes = map[int]bool{
	1007: true, 1009: true, 1020: true, 1021: true, 1037: true, 1213: true,
}

// IsRetryable reports whether err is (or wraps) an Error that the standard
// retry loop retries: transaction_too_old, future_version, not_committed,
// commit_unknown_result, process_behind and tag_throttled.
func IsRetryable(err error) bool {
	var e Error
	return errors.As(err, &e) && retryableCodes[e.Code]
}

// MaybeCommitted reports whether err leaves it unknown if the transaction's
// writes were applied: commit_unknown_result, a commit interrupted by
// cancellation or timeout, or a retry loop that stopped (for any reason)
// after such an attempt. Code that must not apply a write twice (or lose a
// dequeued item) has to find out, e.g. with an operation ID it wrote in the
// same transaction.
func MaybeCommitted(err error) bool {
	return errors.Is(err, ErrCommitUnknownResult) || errors.Is(err, errCommitInterrupted) ||
		errors.Is(err, errEarlierAttemptUncertain)
}

// errEarlierAttemptUncertain marks an error from a retry loop that stopped
// after an attempt whose commit outcome was unknown.
var errEarlierAttemptUncertain = errors.New("an earlier attempt's commit may have been applied")

// errCommitInterrupted marks an error from a commit that was in flight when
// the transaction was cancelled or timed out. Backends wrap it with
// CommitInterrupted.
var errCommitInterrupted = errors.New("commit interrupted: it may have been applied")

// CommitInterrupted wraps err (the cancellation or timeout error) to record
// that a commit was in flight when it happened, so that MaybeCommitted(err)
// reports true. Backends call it; applications need not.
func CommitInterrupted(err error) error {
	return fmt.Errorf("%w: %w", errCommitInterrupted, err)
}
