//go:build !unix

package fdbqueue_test

import "time"

// processCPU is not available on this platform.
func processCPU() (time.Duration, bool) { return 0, false }
