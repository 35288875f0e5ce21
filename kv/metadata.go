package kv

// MetadataVersionKey is FoundationDB's metadata version key
// (metadataVersionKey in fdbclient/SystemData.cpp). Its value is the
// versionstamp of the last transaction that bumped it (10 bytes), or
// absent if none ever did. Layers cache their metadata under it: a
// transaction that changes cached metadata also bumps the key, and a
// reader whose read of the key equals what it saw when it filled its cache
// may use the cache.
//
// Unlike other keys under \xff, it is read without any option, and a read of
// it costs no storage read: FoundationDB returns it with the read version
// (NativeAPI.actor.cpp, Transaction::get;
// documentation/sphinx/source/release-notes/release-notes-610.rst). A normal
// read adds a read conflict on it, a snapshot read none. It can only be
// written with SetVersionstampedValue(MetadataVersionKey,
// MetadataVersionRequiredValue()) (BumpMetadataVersion): a Set or another
// atomic operation of it fails with ErrClientInvalidOp
// (ReadYourWritesTransaction::set and ::atomicOp in
// fdbclient/ReadYourWrites.actor.cpp), a Clear or ClearRange of it with
// ErrKeyOutsideLegalRange (ReadYourWritesTransaction::clear tests the
// legal range only), and reading it after
// bumping it in the same transaction fails with ErrAccessedUnreadable.
const MetadataVersionKey = "\xff/metadataVersion"

// MetadataVersionRequiredValue returns the one operand FoundationDB accepts
// for a write of MetadataVersionKey: 14 zero bytes, a 10-byte versionstamp
// placeholder and its offset 0 (metadataVersionRequiredValue in
// fdbclient/SystemData.cpp).
func MetadataVersionRequiredValue() []byte { return make([]byte, 14) }

// BumpMetadataVersion sets MetadataVersionKey to tr's versionstamp when tr
// commits: every cache validated against the key is stale from then on.
func BumpMetadataVersion(tr Transaction) {
	tr.SetVersionstampedValue([]byte(MetadataVersionKey), MetadataVersionRequiredValue())
}
