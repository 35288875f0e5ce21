package kvtest

import (
	"context"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// Harness gives the suite a backend to test and says what that backend can
// do. Capability differences between backends are expressed here, not as
// skip lists in the suite.
type Harness interface {
	// Database returns the database under test. Every key the suite writes
	// lies under Prefix(); the harness guarantees that range is empty when
	// the harness is made.
	Database() kv.Database
	// Prefix is the key prefix this harness's tests may use.
	Prefix() []byte
	// AdvanceTime makes d pass for the backend's transactions: an embedded
	// engine with an injectable clock moves its clock; a real cluster waits.
	AdvanceTime(d time.Duration)
	// Faults returns a way to inject commit failures, or nil when the
	// backend cannot (a real cluster). Tests that need faults report the
	// capability as missing through t.Skip with the harness's reason.
	Faults() FaultInjector
	// Close releases the harness's resources and clears its prefix.
	Close()
}

// FaultInjector makes a backend fail commits on demand.
type FaultInjector interface {
	// FailNextCommit makes the next commit on the harness's database return
	// err; when applied is true its writes are applied all the same (as an
	// ErrCommitUnknownResult whose commit went through).
	FailNextCommit(err error, applied bool)
}

// HarnessMaker makes a fresh harness for one test.
type HarnessMaker func(ctx context.Context, t *testing.T) (Harness, error)

// CommitHolder is an optional capability of a FaultInjector: holding a
// commit in flight, so that a test can act on its transaction meanwhile.
// Checks that need it skip on backends without it (a real cluster).
type CommitHolder interface {
	// HoldNextCommit makes the next commit that sends writes stop once it
	// is in flight: held is closed when it stops, and it goes on when
	// release is called (or its transaction fails meanwhile).
	HoldNextCommit() (held <-chan struct{}, release func())
}

// ReadFaultInjector is an optional capability of a FaultInjector: failing
// reads and read version requests on demand, as a storage server or a GRV
// proxy of a real cluster may. Checks that need it skip on backends
// without it (a real cluster).
type ReadFaultInjector interface {
	// FailNextRead makes the next read the database serves (a point read,
	// a range read's batch, a watch's read; not one a transaction answers
	// from its own writes) fail with err.
	FailNextRead(err error)
	// FailNextReadVersion makes the next read version request fail with
	// err.
	FailNextReadVersion(err error)
}
