package fdbqueue

// Test seams, visible only to this package's tests.

// OpIDAt makes an OpID stamped with the given time.
var OpIDAt = newOpIDAt

// SetUserVersion sets the user version a versionstamp-ordered q gives its
// next item (at most 65,536).
func SetUserVersion(q *Queue, v uint32) { q.userVer.Store(v) }
