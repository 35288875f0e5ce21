package kvtest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// metadataVersionTests cover kv.MetadataVersionKey. The key is one per
// cluster, so on a shared cluster others may bump it too: the checks
// compare versions and never expect an exact value after their own bump.
func metadataVersionTests() []conformanceTest {
	return []conformanceTest{
		{"BumpSetsTheVersionstamp", testMetadataVersionBump},
		{"ReadAtTheReadVersion", testMetadataVersionAtReadVersion},
		{"NormalReadConflictsWithABump", testMetadataVersionConflict},
		{"SnapshotReadDoesNotConflict", testMetadataVersionSnapshot},
		{"ReadConflictKeyConflictsWithABump", testMetadataVersionConflictKey},
		{"ReadAfterOwnBumpIsUnreadable", testMetadataVersionOwnBump},
		{"OnlyTheRequiredVersionstampedValueWrites", testMetadataVersionWrites},
	}
}

var metadataVersionKey = []byte(kv.MetadataVersionKey)

// metadataVersion reads the key in rt, requiring no error and a value that
// is absent or a versionstamp.
func metadataVersion(t *testing.T, rt kv.ReadTransaction) []byte {
	t.Helper()
	v, err := rt.Get(metadataVersionKey).Get()
	require.NoError(t, err, "reading the metadata version needs no option")
	if v != nil {
		require.Len(t, v, 10, "the metadata version is a versionstamp")
	}
	return v
}

// bump commits a bump of the metadata version and returns its versionstamp.
func (f *fixture) bump(t *testing.T) []byte {
	t.Helper()
	tr := f.newTx(t)
	kv.BumpMetadataVersion(tr)
	stamp, _ := commitStamped(t, tr)
	return stamp
}

// testMetadataVersionBump: a bump is a SetVersionstampedValue of the key,
// so its value becomes the bump's versionstamp
// (metadataVersionRequiredValue, ReadYourWritesTransaction::atomicOp,
// fdbclient/ReadYourWrites.actor.cpp).
func testMetadataVersionBump(t *testing.T, f *fixture) {
	before := metadataVersion(t, f.newTx(t))
	stamp := f.bump(t)
	require.Positive(t, bytes.Compare(stamp, before), "a bump's versionstamp %x must be after the version read before it (%x)", stamp, before)
	after := metadataVersion(t, f.newTx(t))
	require.GreaterOrEqual(t, bytes.Compare(after, stamp), 0, "after a bump, the metadata version %x must be at least its versionstamp %x", after, stamp)
}

// testMetadataVersionAtReadVersion: the key is read as of the read version
// (Transaction::getValue answers it from the GRV reply's metadata version,
// fdbclient/NativeAPI.actor.cpp).
func testMetadataVersionAtReadVersion(t *testing.T, f *fixture) {
	f.bump(t)
	tr := f.newTx(t)
	first := metadataVersion(t, tr.Snapshot())
	later := f.bump(t)
	require.Equal(t, first, metadataVersion(t, tr.Snapshot()), "a transaction reads the metadata version as of its read version, not the bump committed since")
	require.Positive(t, bytes.Compare(later, first), "the later bump %x must be after %x", later, first)
}

// testMetadataVersionConflict: a normal read of the key adds its read
// conflict range, and a bump writes it (addConflictRange,
// fdbclient/ReadYourWrites.actor.cpp).
func testMetadataVersionConflict(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	metadataVersion(t, tr)
	tr.Set(f.key("cached"), []byte("x"))
	f.bump(t)
	requireCode(t, tr.Commit(), kv.ErrNotCommitted, "a commit after a normal read of the metadata version, bumped since")
}

// testMetadataVersionSnapshot: a snapshot read of it adds none
// (readWithConflictRangeRYW, ReadYourWrites.actor.cpp).
func testMetadataVersionSnapshot(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	metadataVersion(t, tr.Snapshot())
	tr.Set(f.key("cached"), []byte("x"))
	f.bump(t)
	commit(t, tr, "a snapshot read of the metadata version adds no read conflict")
}

// testMetadataVersionOwnBump: after a bump in the same transaction the key
// is unreadable, as any versionstamped value (WriteMap::mutate,
// fdbclient/WriteMap.cpp).
func testMetadataVersionOwnBump(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	kv.BumpMetadataVersion(tr)
	_, err := tr.Snapshot().Get(metadataVersionKey).Get()
	requireCode(t, err, kv.ErrAccessedUnreadable, "a read of the metadata version after bumping it in the same transaction")
}

// testMetadataVersionWrites: any write of the key but
// SetVersionstampedValue of metadataVersionRequiredValue throws
// client_invalid_operation (ReadYourWritesTransaction::set and atomicOp,
// fdbclient/ReadYourWrites.actor.cpp), deferred to the commit.
func testMetadataVersionWrites(t *testing.T, f *fixture) {
	cases := []struct {
		name  string
		write func(kv.Transaction)
	}{
		{"Set", func(tr kv.Transaction) { tr.Set(metadataVersionKey, make([]byte, 10)) }},
		{"Add", func(tr kv.Transaction) { tr.Add(metadataVersionKey, le(1, 8)) }},
		{"SetVersionstampedValue with another operand", func(tr kv.Transaction) {
			tr.SetVersionstampedValue(metadataVersionKey, stampedValue("x", ""))
		}},
	}
	for _, c := range cases {
		tr := f.newTx(t)
		c.write(tr)
		requireCode(t, tr.Commit(), kv.ErrClientInvalidOp, "a commit after a "+c.name+" of the metadata version key")
	}
}

// testMetadataVersionConflictKey: the key's own read conflict range is
// allowed though it is above \xff
// (ReadYourWritesTransaction::addReadConflictRange,
// fdbclient/ReadYourWrites.actor.cpp).
func testMetadataVersionConflictKey(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	metadataVersion(t, tr.Snapshot())
	require.NoError(t, tr.AddReadConflictKey(metadataVersionKey), "the metadata version's read conflict key is allowed")
	tr.Set(f.key("cached"), []byte("x"))
	f.bump(t)
	requireCode(t, tr.Commit(), kv.ErrNotCommitted, "a commit after adding the metadata version's read conflict key, bumped since")
}
