package kv_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// TestErrorPredicate checks kv's classification code by code against
// FoundationDB 7.3's fdb_error_predicate (bindings/c/fdb_c.cpp): RETRYABLE =
// MAYBE_COMMITTED ∪ RETRYABLE_NOT_COMMITTED, with the codes and names of
// flow/include/flow/error_definitions.h. commit_unknown_result_fatal (1022,
// thrown by NativeAPI.actor.cpp determineCommitStatus when the idempotency
// ID has expired) is in neither predicate, yet its commit status is unknown
// by definition, so MaybeCommitted is true for it.
func TestErrorPredicate(t *testing.T) {
	for _, c := range []struct {
		code           int
		name           string
		sentinel       kv.Error
		retryable      bool
		maybeCommitted bool
	}{
		// MAYBE_COMMITTED
		{1021, "commit_unknown_result", kv.ErrCommitUnknownResult, true, true},
		{1039, "cluster_version_changed", kv.ErrClusterVersionChanged, true, true},
		// RETRYABLE_NOT_COMMITTED
		{1020, "not_committed", kv.ErrNotCommitted, true, false},
		{1007, "transaction_too_old", kv.ErrTransactionTooOld, true, false},
		{1009, "future_version", kv.ErrFutureVersion, true, false},
		{1038, "database_locked", kv.ErrDatabaseLocked, true, false},
		{1078, "grv_proxy_memory_limit_exceeded", kv.ErrGRVProxyMemoryLimit, true, false},
		{1042, "commit_proxy_memory_limit_exceeded", kv.ErrCommitProxyMemoryLimit, true, false},
		{1051, "batch_transaction_throttled", kv.ErrBatchTransactionThrottled, true, false},
		{1037, "process_behind", kv.ErrProcessBehind, true, false},
		{1213, "tag_throttled", kv.ErrTagThrottled, true, false},
		{1223, "proxy_tag_throttled", kv.ErrProxyTagThrottled, true, false},
		{1235, "transaction_throttled_hot_shard", kv.ErrHotShardThrottled, true, false},
		{1242, "transaction_rejected_range_locked", kv.ErrRangeLocked, true, false},
		// Neither.
		{1022, "commit_unknown_result_fatal", kv.ErrCommitUnknownResultFatal, false, true},
		{1025, "transaction_cancelled", kv.ErrTransactionCancelled, false, false},
		{1031, "transaction_timed_out", kv.ErrTransactionTimedOut, false, false},
		{1032, "too_many_watches", kv.ErrTooManyWatches, false, false},
		{1034, "watches_disabled", kv.ErrWatchesDisabled, false, false},
		{1036, "accessed_unreadable", kv.ErrAccessedUnreadable, false, false},
		{2000, "client_invalid_operation", kv.ErrClientInvalidOp, false, false},
		{2004, "key_outside_legal_range", kv.ErrKeyOutsideLegalRange, false, false},
		{2005, "inverted_range", kv.ErrInvertedRange, false, false},
		{2017, "used_during_commit", kv.ErrUsedDuringCommit, false, false},
		{2101, "transaction_too_large", kv.ErrTransactionTooLarge, false, false},
		{2102, "key_too_large", kv.ErrKeyTooLarge, false, false},
		{2103, "value_too_large", kv.ErrValueTooLarge, false, false},
		{4100, "internal_error", kv.ErrInternal, false, false},
	} {
		t.Run(fmt.Sprintf("%s_%d", c.name, c.code), func(t *testing.T) {
			require.Equal(t, c.code, c.sentinel.Code)
			require.Equal(t, fmt.Sprintf("%s (%d)", c.name, c.code), c.sentinel.Error())
			for _, err := range []error{kv.Error{Code: c.code}, fmt.Errorf("layer: %w", c.sentinel)} {
				require.Equal(t, c.retryable, kv.IsRetryable(err), "IsRetryable(%v)", err)
				require.Equal(t, c.maybeCommitted, kv.MaybeCommitted(err), "MaybeCommitted(%v)", err)
			}
		})
	}
	require.False(t, kv.IsRetryable(errors.New("not an fdb error")))
	require.False(t, kv.MaybeCommitted(errors.New("not an fdb error")))
	require.False(t, kv.IsRetryable(nil))
	require.False(t, kv.MaybeCommitted(nil))
}
