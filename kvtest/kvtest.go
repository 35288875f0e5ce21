package kvtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// RunConformanceTests runs the whole conformance suite against the backend
// that newHarness makes. Every check is a named subtest (Area/Check, e.g.
// "Conflicts/ForwardLimitNoConflictAfterLastKey") with a fresh harness of its
// own, made by calling newHarness and closed with t.Cleanup when the subtest
// ends. Checks that need a capability the harness reports as missing are
// skipped with a one-line reason.
func RunConformanceTests(t *testing.T, newHarness HarnessMaker) {
	t.Helper()
	areas := []struct {
		name  string
		tests []conformanceTest
	}{
		{"Reads", readTests()},
		{"Conflicts", conflictTests()},
		{"Atomics", atomicTests()},
		{"Versionstamps", versionstampTests()},
		{"MetadataVersion", metadataVersionTests()},
		{"Watches", watchTests()},
		{"Limits", limitTests()},
		{"Time", timeTests()},
		{"Errors", errorTests()},
		{"Retry", retryTests()},
		{"Faults", faultTests()},
		{"Concurrency", concurrencyTests()},
	}
	for _, area := range areas {
		t.Run(area.name, func(t *testing.T) {
			for _, tc := range area.tests {
				t.Run(tc.name, func(t *testing.T) {
					tc.run(t, newFixture(t, newHarness))
				})
			}
		})
	}
}

// conformanceTest is one named check of the suite.
type conformanceTest struct {
	name string
	run  func(t *testing.T, f *fixture)
}

// fixture is the per-subtest setup bundle: a fresh harness, its database, a
// context that ends with the subtest, and helpers that keep every key under
// the harness's prefix.
type fixture struct {
	h      Harness
	db     kv.Database
	ctx    context.Context
	prefix []byte
}

func newFixture(t *testing.T, newHarness HarnessMaker) *fixture {
	t.Helper()
	ctx := t.Context()
	h, err := newHarness(ctx, t)
	require.NoError(t, err, "the harness maker failed")
	require.NotNil(t, h, "the harness maker returned a nil harness")
	t.Cleanup(h.Close)
	db := h.Database()
	require.NotNil(t, db, "Harness.Database returned nil")
	prefix := bytes.Clone(h.Prefix())
	require.NotEmpty(t, prefix, "Harness.Prefix must not be empty: the suite keeps its keys under it")
	require.Less(t, prefix[0], byte(0xff), "Harness.Prefix must lie below the system key space")
	return &fixture{h: h, db: db, ctx: ctx, prefix: prefix}
}

// key returns the harness prefix followed by s.
func (f *fixture) key(s string) []byte {
	return append(bytes.Clone(f.prefix), s...)
}

// keys maps key over names.
func (f *fixture) keys(names ...string) [][]byte {
	out := make([][]byte, len(names))
	for i, n := range names {
		out[i] = f.key(n)
	}
	return out
}

// rng returns the key range [key(begin), key(end)).
func (f *fixture) rng(begin, end string) kv.KeyRange {
	return kv.KeyRange{Begin: f.key(begin), End: f.key(end)}
}

// all is a range that covers every key the tests name with a printable
// suffix: [prefix, prefix+"\xff").
func (f *fixture) all() kv.KeyRange {
	return f.rng("", "\xff")
}

// markerKey is a key under the prefix but outside f.all(), for writes that
// must not fall into the ranges a test reads.
func (f *fixture) markerKey(name string) []byte {
	return f.key("\xff" + name)
}

// name strips the prefix from a key, for readable failure messages.
func (f *fixture) name(key []byte) string {
	if bytes.HasPrefix(key, f.prefix) {
		return fmt.Sprintf("%q", key[len(f.prefix):])
	}
	return fmt.Sprintf("(outside prefix) %q", key)
}

// names maps name over the keys of kvs.
func (f *fixture) names(kvs []kv.KeyValue) []string {
	out := make([]string, len(kvs))
	for i, p := range kvs {
		out[i] = f.name(p.Key)
	}
	return out
}

// quoted formats each name the way name does, for comparison with names.
func quoted(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}

// newTx creates a transaction on the database under test.
func (f *fixture) newTx(t *testing.T) kv.Transaction {
	t.Helper()
	tr, err := f.db.CreateTransaction(f.ctx)
	require.NoError(t, err, "CreateTransaction")
	require.NotNil(t, tr, "CreateTransaction returned a nil transaction")
	return tr
}

// commit commits tr and requires success.
func commit(t *testing.T, tr kv.Transaction, msgAndArgs ...any) {
	t.Helper()
	require.NoError(t, tr.Commit(), msgAndArgs...)
}

// readVersion makes tr obtain its read version and returns it.
func readVersion(t *testing.T, tr kv.Transaction) int64 {
	t.Helper()
	v, err := tr.GetReadVersion().Get()
	require.NoError(t, err, "GetReadVersion")
	return v
}

// set commits value at key in a transaction of its own.
func (f *fixture) set(t *testing.T, key, value []byte) {
	t.Helper()
	tr := f.newTx(t)
	tr.Set(key, value)
	commit(t, tr, "committing a setup write of %s", f.name(key))
}

// seed commits the value "v:<name>" at key(name) for each name, in one
// transaction.
func (f *fixture) seed(t *testing.T, names ...string) {
	t.Helper()
	if len(names) == 0 {
		return
	}
	tr := f.newTx(t)
	for _, n := range names {
		tr.Set(f.key(n), []byte("v:"+n))
	}
	commit(t, tr, "committing the seed keys %q", names)
}

// get reads key in a fresh transaction.
func (f *fixture) get(t *testing.T, key []byte) []byte {
	t.Helper()
	tr := f.newTx(t)
	v, err := tr.Get(key).Get()
	require.NoError(t, err, "reading %s in a fresh transaction", f.name(key))
	return v
}

// getRange reads r in a fresh transaction.
func (f *fixture) getRange(t *testing.T, r kv.KeyRange, opts kv.RangeOptions) []kv.KeyValue {
	t.Helper()
	tr := f.newTx(t)
	kvs, err := tr.GetRange(r, opts).GetSlice()
	require.NoError(t, err, "reading a range in a fresh transaction")
	return kvs
}

// mustGet reads key through rt and requires success.
func mustGet(t *testing.T, rt kv.ReadTransaction, key []byte) []byte {
	t.Helper()
	v, err := rt.Get(key).Get()
	require.NoError(t, err, "Get(%q)", key)
	return v
}

// mustRange reads r through rt and requires success.
func mustRange(t *testing.T, rt kv.ReadTransaction, r kv.KeyRange, opts kv.RangeOptions) []kv.KeyValue {
	t.Helper()
	kvs, err := rt.GetRange(r, opts).GetSlice()
	require.NoError(t, err, "GetRange(%q, %q, %+v)", r.Begin, r.End, opts)
	return kvs
}

// requireNames requires kvs to hold exactly the keys key(want[i]), in order.
func (f *fixture) requireNames(t *testing.T, kvs []kv.KeyValue, want []string, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, quoted(want...), f.names(kvs), msgAndArgs...)
}

// le encodes v as a little-endian integer of width bytes.
func le(v uint64, width int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, v)
	if width <= 8 {
		return b[:width]
	}
	return append(b, make([]byte, width-8)...)
}

// leInt64 encodes v as an 8-byte little-endian two's complement integer.
func leInt64(v int64) []byte {
	return binary.LittleEndian.AppendUint64(nil, uint64(v))
}

// decodeCounter decodes an 8-byte little-endian counter; nil is zero.
func decodeCounter(t *testing.T, v []byte) int64 {
	t.Helper()
	if v == nil {
		return 0
	}
	require.Len(t, v, 8, "a counter value must be 8 bytes, got %x", v)
	return int64(binary.LittleEndian.Uint64(v))
}

// retryableBySpec is FoundationDB 7.3's fdb_error_predicate(RETRYABLE)
// (bindings/c/fdb_c.cpp: MAYBE_COMMITTED ∪ RETRYABLE_NOT_COMMITTED, codes
// from flow/include/flow/error_definitions.h) plus the two codes 7.4 adds
// to it (1235, 1242; see onErrorMayReturn), kept here independently of the kv
// package so that a drift between the two is caught.
var retryableBySpec = map[int]bool{
	1007: true,  // transaction_too_old
	1009: true,  // future_version
	1020: true,  // not_committed
	1021: true,  // commit_unknown_result (MAYBE_COMMITTED)
	1022: false, // commit_unknown_result_fatal
	1025: false, // transaction_cancelled
	1031: false, // transaction_timed_out
	1036: false, // accessed_unreadable
	1037: true,  // process_behind
	1038: true,  // database_locked
	1039: true,  // cluster_version_changed (MAYBE_COMMITTED)
	1042: true,  // commit_proxy_memory_limit_exceeded
	1051: true,  // batch_transaction_throttled
	1078: true,  // grv_proxy_memory_limit_exceeded
	1213: true,  // tag_throttled
	1223: true,  // proxy_tag_throttled
	1235: true,  // transaction_throttled_hot_shard (7.4+)
	1242: true,  // transaction_rejected_range_locked (7.4+)
	2004: false, // key_outside_legal_range
	2005: false, // inverted_range
	2017: false, // used_during_commit
	2101: false, // transaction_too_large
	2102: false, // key_too_large
	2103: false, // value_too_large
}

// onErrorMayReturn are the retryable codes that a backend's OnError may
// retry or return. 1235 and 1242 are the retryable codes that FoundationDB
// 7.3 does not have: its error_definitions.h gives 1235 to
// finish_move_keys_too_many_retries and has no 1242, and its
// Transaction::onError (fdbclient/NativeAPI.actor.cpp) retries neither,
// while 7.4's retries both. cluster_version_changed (1039) only FDB's
// multi-version client reports, and its onError retries it
// (MultiVersionTransaction::onError,
// fdbclient/MultiVersionTransaction.actor.cpp), while a client that
// bypasses it (one without external client libraries:
// MultiVersionApi::setupNetwork) returns it: Transaction::onError does not
// retry 1039, in 7.3 or 7.4.
var onErrorMayReturn = map[int]bool{1235: true, 1242: true, 1039: true}

// maybeCommittedBySpec are the codes whose commit may have been applied:
// fdb_error_predicate(MAYBE_COMMITTED), and commit_unknown_result_fatal,
// which NativeAPI.actor.cpp (determineCommitStatus) throws when it cannot
// determine whether the commit applied.
var maybeCommittedBySpec = map[int]bool{1021: true, 1022: true, 1039: true}

// requireCode requires err to be the kv error want: errors.Is matches the
// sentinel, errors.As yields a kv.Error with its code, and, for codes in the
// spec's table, kv.IsRetryable classifies it as the table says. what says
// which operation returned err.
func requireCode(t *testing.T, err error, want kv.Error, what string) {
	t.Helper()
	require.Error(t, err, "%s: expected %v, got no error", what, want)
	require.ErrorIs(t, err, want, "%s: expected %v, got %v", what, want, err)
	var e kv.Error
	require.True(t, errors.As(err, &e), "%s: errors.As(%v, *kv.Error) failed: the backend must translate its errors into kv.Error", what, err)
	require.Equal(t, want.Code, e.Code, "%s: errors.As yielded the wrong code for %v", what, err)
	if retryable, ok := retryableBySpec[want.Code]; ok {
		require.Equal(t, retryable, kv.IsRetryable(err), "%s: kv.IsRetryable(%v) disagrees with the spec's table", what, err)
	}
}

// requireAbsent requires key to be missing when read by a fresh transaction.
func (f *fixture) requireAbsent(t *testing.T, key []byte, msgAndArgs ...any) {
	t.Helper()
	v := f.get(t, key)
	require.Nil(t, v, msgAndArgs...)
}

// requireValue requires key to hold want when read by a fresh transaction.
func (f *fixture) requireValue(t *testing.T, key, want []byte, msgAndArgs ...any) {
	t.Helper()
	got := f.get(t, key)
	require.NotNil(t, got, msgAndArgs...)
	require.Equal(t, want, got, msgAndArgs...)
}

// maxRuns bounds how often fixture.transact lets a transactional function
// run before it gives up on the backend's retry loop.
const maxRuns = 50

// transact runs fn through the database's Transact and returns how many
// times fn ran (run counts from 1). Past maxRuns runs it cancels Transact's
// context, so that a retry loop that never gives up fails the test instead
// of hanging it.
func (f *fixture) transact(fn func(tr kv.Transaction, run int) error) (int, error) {
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	runs := 0
	err := f.db.Transact(ctx, func(tr kv.Transaction) error {
		runs++
		if runs > maxRuns {
			cancel()
		}
		return fn(tr, runs)
	})
	return runs, err
}
