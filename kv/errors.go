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
	ErrTransactionTooOld         = Error{Code: 1007} // read version older than the MVCC window (5 s)
	ErrFutureVersion             = Error{Code: 1009} // storage not yet at the read version
	ErrNotCommitted              = Error{Code: 1020} // conflict: a key read was written by a later commit
	ErrCommitUnknownResult       = Error{Code: 1021} // the commit may or may not have been applied
	ErrCommitUnknownResultFatal  = Error{Code: 1022} // commit status undeterminable (idempotency ID expired); not retried, may have applied
	ErrTransactionCancelled      = Error{Code: 1025} // Cancel was called (or the context ended)
	ErrTransactionTimedOut       = Error{Code: 1031} // the timeout option expired
	ErrTooManyWatches            = Error{Code: 1032} // the database's watch limit was reached
	ErrWatchesDisabled           = Error{Code: 1034} // watches are disabled on this transaction
	ErrAccessedUnreadable        = Error{Code: 1036} // a read reached a key whose final bytes or value are a pending versionstamp
	ErrProcessBehind             = Error{Code: 1037} // a storage server is behind
	ErrDatabaseLocked            = Error{Code: 1038} // the database is locked
	ErrClusterVersionChanged     = Error{Code: 1039} // the cluster's protocol version changed; the commit may have been applied
	ErrBrokenPromise             = Error{Code: 1100} // the work behind a future was dropped: FDB 7.3 fails a key's only watch so when a storage server lags
	ErrCommitProxyMemoryLimit    = Error{Code: 1042} // a commit proxy's memory limit was exceeded
	ErrBatchTransactionThrottled = Error{Code: 1051} // batch-priority read versions are rate limited
	ErrGRVProxyMemoryLimit       = Error{Code: 1078} // a GRV proxy's memory limit was exceeded
	ErrTagThrottled              = Error{Code: 1213} // the transaction's tag is throttled
	ErrProxyTagThrottled         = Error{Code: 1223} // throttled by a proxy's tag throttling for too long
	ErrHotShardThrottled         = Error{Code: 1235} // throttled because it writes a hot shard (FDB 7.4+)
	ErrRangeLocked               = Error{Code: 1242} // rejected: a range it touches is locked (FDB 7.4+)
	ErrUsedDuringCommit          = Error{Code: 2017} // an operation ran while a commit was in flight
	ErrKeyOutsideLegalRange      = Error{Code: 2004} // a key at or above \xff without system access
	ErrInvertedRange             = Error{Code: 2005} // a range whose begin is after its end
	ErrInvalidOptionValue        = Error{Code: 2006} // an option value out of its range (a negative timeout)
	ErrRangeLimitsInvalid        = Error{Code: 2012} // a range read with a negative limit
	ErrTransactionTooLarge       = Error{Code: 2101} // over 10,000,000 bytes of affected data
	ErrKeyTooLarge               = Error{Code: 2102} // a key over 10,000 bytes
	ErrValueTooLarge             = Error{Code: 2103} // a value over 100,000 bytes
	ErrClientInvalidOp           = Error{Code: 2000} // an operation not valid in this state
	ErrInternal                  = Error{Code: 4100} // an internal error of the backend
)

var errorNames = map[int]string{
	1007: "transaction_too_old",
	1009: "future_version",
	1020: "not_committed",
	1021: "commit_unknown_result",
	1022: "commit_unknown_result_fatal",
	1025: "transaction_cancelled",
	1031: "transaction_timed_out",
	1032: "too_many_watches",
	1034: "watches_disabled",
	1036: "accessed_unreadable",
	1037: "process_behind",
	1038: "database_locked",
	1039: "cluster_version_changed",
	1042: "commit_proxy_memory_limit_exceeded",
	1051: "batch_transaction_throttled",
	1078: "grv_proxy_memory_limit_exceeded",
	1100: "broken_promise",
	1213: "tag_throttled",
	1223: "proxy_tag_throttled",
	1235: "transaction_throttled_hot_shard",
	1242: "transaction_rejected_range_locked",
	2000: "client_invalid_operation",
	2004: "key_outside_legal_range",
	2005: "inverted_range",
	2006: "invalid_option_value",
	2012: "range_limits_invalid",
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

// FoundationDB classifies errors with fdb_error_predicate (bindings/c/
// fdb_c.cpp): MAYBE_COMMITTED is commit_unknown_result and
// cluster_version_changed; RETRYABLE_NOT_COMMITTED is not_committed,
// transaction_too_old, future_version, database_locked, the GRV and commit
// proxy memory limits, batch_transaction_throttled, process_behind,
// tag_throttled, proxy_tag_throttled (7.3; its code is retired since),
// transaction_throttled_hot_shard and transaction_rejected_range_locked
// (7.4 and later); RETRYABLE is their union. The codes are those of
// flow/include/flow/error_definitions.h.
var (
	maybeCommittedCodes        = map[int]bool{1021: true, 1039: true}
	retryableNotCommittedCodes = map[int]bool{
		1020: true, 1007: true, 1009: true, 1038: true, 1078: true,
		1042: true, 1051: true, 1037: true, 1213: true, 1223: true,
		1235: true, 1242: true,
	}
)

// IsRetryable reports whether err is (or wraps) an Error that the standard
// retry loop retries: FDB's RETRYABLE predicate, i.e. the codes a commit
// may have applied (commit_unknown_result 1021, cluster_version_changed
// 1039; see MaybeCommitted) and those that certainly did not commit
// (not_committed 1020, transaction_too_old 1007, future_version 1009,
// database_locked 1038, grv_proxy_memory_limit_exceeded 1078,
// commit_proxy_memory_limit_exceeded 1042, batch_transaction_throttled
// 1051, process_behind 1037, tag_throttled 1213, proxy_tag_throttled 1223,
// transaction_throttled_hot_shard 1235, transaction_rejected_range_locked
// 1242). It is the predicate of FDB's C API (fdb_error_predicate); a
// backend's OnError decides, and FDB's may retry a few more codes (in 7.3,
// blob_granule_request_failed; Transaction::onError).
func IsRetryable(err error) bool {
	var e Error
	return errors.As(err, &e) && (maybeCommittedCodes[e.Code] || retryableNotCommittedCodes[e.Code])
}

// MaybeCommitted reports whether err leaves it unknown if the transaction's
// writes were applied: FDB's MAYBE_COMMITTED predicate (commit_unknown_result
// 1021, cluster_version_changed 1039), commit_unknown_result_fatal (1022,
// which FDB does not retry but whose commit status is unknown by
// definition), a commit interrupted by cancellation, a timeout or a read
// issued during it (CommitInterrupted), or a retry loop that stopped (for
// any reason) after such an attempt. Code that must not apply a write
// twice (or lose a dequeued item) has to find out, e.g. with an operation
// ID it wrote in the same transaction.
func MaybeCommitted(err error) bool {
	return errors.Is(err, ErrCommitUnknownResult) || errors.Is(err, ErrClusterVersionChanged) ||
		errors.Is(err, ErrCommitUnknownResultFatal) ||
		errors.Is(err, errCommitInterrupted) || errors.Is(err, errEarlierAttemptUncertain)
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
