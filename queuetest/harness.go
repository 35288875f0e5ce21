package queuetest

import (
	"context"
	"testing"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/kvtest"
)

// Harness gives the suite a backend to test and says what that backend can
// do. Its methods are a subset of kvtest.Harness's, so a backend's kvtest
// harness serves this suite as it is.
type Harness interface {
	// Database returns the database under test.
	Database() kv.Database
	// Prefix is the key prefix the suite may use; the harness guarantees
	// that every key starting with it is absent when the harness is made.
	// It must not be empty and must lie below the system keys (0xff).
	// Keep it short, at most 24 bytes: each item of a batch counts its
	// key's length against the batch budget, and the checks of a batch of
	// 65,536 items (a versionstamp transaction's user versions) skip on a
	// longer prefix, where that many cannot fit.
	Prefix() []byte
	// Faults returns a way to make commits fail on demand, or nil when the
	// backend cannot (a real cluster): the checks of exactly-once under
	// injected faults then skip. kvtest.FaultInjector's contract applies:
	// the injected error hits the next commit on Database().
	Faults() kvtest.FaultInjector
	// Close releases the harness's resources and clears its prefix.
	Close()
}

// HarnessMaker makes a fresh harness for one check.
type HarnessMaker func(ctx context.Context, t *testing.T) (Harness, error)
