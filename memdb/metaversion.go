package memdb

import "github.com/fdbqueue/fdbqueue/kv"

// The metadata version key (kv.MetadataVersionKey) is the one key under \xff
// that memdb serves. As in FoundationDB, it lives apart from the keys: a
// commit that bumps it records its versionstamp in a short history (the
// master keeps the newest value and hands it out with every read version,
// documentation/sphinx/source/release-notes/release-notes-610.rst), and a
// read of it costs no lookup in the store.

// mvStamp is one bump of the metadata version: the commit version and its
// versionstamp.
type mvStamp struct {
	v     int64
	stamp [10]byte
}

// mvHistory holds the bumps a read at a version at or above the horizon
// may still see: the newest at or below the horizon and every later one.
// The caller holds db.mu (shared to read, exclusive to bump).
type mvHistory []*mvStamp

// at returns the metadata version as of rv: the stamp of the last bump at
// or before rv (never modified), or nil if there was none.
func (h mvHistory) at(rv int64) []byte {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].v <= rv {
			return h[i].stamp[:]
		}
	}
	return nil
}

// latest returns the newest metadata version (never modified), or nil if
// it was never bumped.
func (h mvHistory) latest() []byte {
	if len(h) == 0 {
		return nil
	}
	return h[len(h)-1].stamp[:]
}

// bumpedAfter reports whether a bump committed after rv: a transaction
// that read at rv with the metadata version's read conflict range
// conflicts. The newest bump is always kept.
func (h mvHistory) bumpedAfter(rv int64) bool { return len(h) > 0 && h[len(h)-1].v > rv }

// bump records a commit at v with versionstamp stamp and drops the bumps
// no read at or above horizon can see.
func (h *mvHistory) bump(v int64, stamp [10]byte, horizon int64) {
	s := *h
	n := 0
	for n+1 < len(s) && s[n+1].v <= horizon {
		n++
	}
	if n > 0 {
		s = append(s[:0], s[n:]...)
	}
	*h = append(s, &mvStamp{v: v, stamp: stamp})
}

// isMetadataVersionKey reports whether key is kv.MetadataVersionKey.
func isMetadataVersionKey(key []byte) bool { return string(key) == kv.MetadataVersionKey }

// metadataVersionEnd is the end of the metadata version key's conflict
// range (metadataVersionKeyEnd in fdbclient/SystemData.cpp).
var metadataVersionEnd = []byte(kv.MetadataVersionKey + "\x00")

// checkMetadataVersionWrite checks a SetVersionstampedValue of the
// metadata version key: its operand must be exactly 14 zero bytes
// (ReadYourWritesTransaction::atomicOp, fdbclient/ReadYourWrites.actor.cpp). It
// returns the value's body and the versionstamp's offset.
func checkMetadataVersionWrite(value []byte) ([]byte, int, error) {
	if len(value) != 14 {
		return nil, 0, kv.ErrClientInvalidOp
	}
	for _, b := range value {
		if b != 0 {
			return nil, 0, kv.ErrClientInvalidOp
		}
	}
	return value[:10], 0, nil
}
