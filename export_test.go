package fdbqueue

// Test seams, visible only to this package's tests.

// OpIDAt makes an OpID stamped with the given time.
var OpIDAt = newOpIDAt
