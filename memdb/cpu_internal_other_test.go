//go:build !unix

package memdb

import "time"

// cpuTime is not available on this platform.
func cpuTime() (time.Duration, bool) { return 0, false }
