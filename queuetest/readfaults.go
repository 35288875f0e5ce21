package queuetest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// ReadFaultSweeper is an optional capability of a Harness's FaultInjector:
// failing a chosen read or read version request, and counting the
// failures, so that a check can make each read of an operation fail in
// turn. The read fault checks skip on backends without it (a real
// cluster). memdb's DB provides the first two methods (FailReadAfter,
// FailReadVersionAfter); its harness counts from its Stats.
type ReadFaultSweeper interface {
	// FailReadAfter makes the read after the next n the database serves
	// fail with err; a negative n disarms it.
	FailReadAfter(n int, err error)
	// FailReadVersionAfter does the same for read version requests.
	FailReadVersionAfter(n int, err error)
	// ReadFaultsInjected is the number of reads and read version requests
	// failed so far.
	ReadFaultsInjected() int64
}

// readErrors are the errors FoundationDB's client lets through from a
// storage server's reply to a read (getValue and getRange,
// fdbclient/NativeAPI.actor.cpp); all three are retryable
// (fdb_error_predicate, bindings/c/fdb_c.cpp).
var readErrors = []kv.Error{kv.ErrTransactionTooOld, kv.ErrFutureVersion, kv.ErrProcessBehind}

// sweepKind is how a read fault sweep fails the k-th read of an operation.
type sweepKind struct {
	name   string
	inject func(fi interface{ FailNextCommit(error, bool) }, rs ReadFaultSweeper, k int)
}

var sweepKinds = []sweepKind{
	{"every_read", func(_ interface{ FailNextCommit(error, bool) }, rs ReadFaultSweeper, k int) {
		rs.FailReadAfter(k, readErrors[k%len(readErrors)])
	}},
	{"every_read_version", func(_ interface{ FailNextCommit(error, bool) }, rs ReadFaultSweeper, k int) {
		err := kv.ErrGRVProxyMemoryLimit
		if k%2 == 1 {
			err = kv.ErrDatabaseLocked
		}
		rs.FailReadVersionAfter(k, err)
	}},
	// The operation's first commit is applied but reported
	// commit_unknown_result, and a read fails: one of the first attempt's,
	// or one of the retry that must find the first attempt's effect (the
	// journal's record) and return its result.
	{"unknown_applied_then_every_read", func(fi interface{ FailNextCommit(error, bool) }, rs ReadFaultSweeper, k int) {
		fi.FailNextCommit(kv.ErrCommitUnknownResult, true)
		rs.FailReadAfter(k, readErrors[k%len(readErrors)])
	}},
	{"unknown_not_applied_then_every_read", func(fi interface{ FailNextCommit(error, bool) }, rs ReadFaultSweeper, k int) {
		fi.FailNextCommit(kv.ErrCommitUnknownResult, false)
		rs.FailReadAfter(k, readErrors[k%len(readErrors)])
	}},
}

// maxSweep bounds a sweep: no operation and its checks read that often.
const maxSweep = 400

// readFaultChecks run every operation of the fault checks (faultOps,
// jobFaultOps) once per read it and its checks make, that read failing
// with a retryable error (a storage server's, or the read version
// request's), alone or after the operation's first commit was reported
// commit_unknown_result: each time the operation must succeed, take effect
// once and return what it would have without the fault.
func readFaultChecks() []check {
	var cs []check
	type sweep struct {
		op    layerOp
		kinds []sweepKind
	}
	var sweeps []sweep
	for _, op := range append(faultOps(), jobFaultOps()...) {
		sweeps = append(sweeps, sweep{op, sweepKinds})
	}
	// The checks of Recover, of the staged dequeue (waiters asleep on
	// watches, woken, served in line) and of JobQueue's LeaseWait and
	// worker pool, each read failing in turn from the
	// check's start on: read faults only, since an injected
	// commit_unknown_result would hit their setup's writes, which take no
	// operation ID (a caller's loop retried after an applied commit writes
	// twice, as documented).
	for _, area := range []struct {
		name   string
		checks []check
	}{{"Recover", recoverChecks()}, {"Staged", stagedChecks()}, {"Jobs", waitingJobChecks()}} {
		for _, c := range area.checks {
			op := layerOp{area.name + "/" + c.name, func(t *testing.T, f *fixture, inject func()) {
				inject()
				c.run(t, f)
			}}
			sweeps = append(sweeps, sweep{op, sweepKinds[:2]})
		}
	}
	for _, sw := range sweeps {
		op := sw.op
		for _, kind := range sw.kinds {
			cs = append(cs, check{op.name + "/" + kind.name, func(t *testing.T, f *fixture) {
				fi := f.faults(t)
				rs, ok := fi.(ReadFaultSweeper)
				if !ok {
					t.Skip("capability missing: the backend cannot fail chosen reads (FaultInjector is not a queuetest.ReadFaultSweeper)")
				}
				f.sweeping = true
				k := 0
				defer func() {
					rs.FailReadAfter(-1, nil)
					rs.FailReadVersionAfter(-1, nil)
					if t.Failed() {
						t.Logf("the failing run failed read (or read version request) %d, counted from the operation's first injection", k)
					}
				}()
				for ; ; k++ {
					require.Less(t, k, maxSweep, "the sweep does not end")
					before := rs.ReadFaultsInjected()
					op.run(t, f, func() { kind.inject(fi, rs, k) })
					if rs.ReadFaultsInjected() == before {
						return // the operation and its checks made fewer reads
					}
				}
			}})
		}
	}
	return cs
}

// waitingJobChecks are the JobQueue checks of LeaseWait and the worker
// pool, which sleep on watches and handle errors in loops of their own.
func waitingJobChecks() []check {
	var cs []check
	for _, c := range jobChecks() {
		if strings.Contains(c.name, "LeaseWait") || strings.HasPrefix(c.name, "Pool") {
			cs = append(cs, c)
		}
	}
	return cs
}
