package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// A commit interrupted by cancellation (kv.MaybeCommitted: it may have been
// applied) is settled with the same operation ID: a pop whose commit went
// through still prints its item, and a push that went through is not
// applied twice. Without settling, the popped item would be gone and
// unprinted. The error is the one fdbkv returns for a commit in flight when
// the transaction is cancelled (kv.CommitInterrupted).
func TestSettleMaybeCommitted(t *testing.T) {
	interrupted := kv.CommitInterrupted(context.Canceled)
	for _, applied := range []bool{true, false} {
		t.Run(map[bool]string{true: "applied", false: "not applied"}[applied], func(t *testing.T) {
			db := demoDB(t)
			db.FailNextCommit(interrupted, applied)
			r := runCLI(t, db, nil, args("pop", "jobs")...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			assert.Equal(t, "resize img-1\n", r.stdout)

			db.FailNextCommit(interrupted, applied)
			r = runCLI(t, db, nil, args("push", "jobs", "once")...)
			require.Equal(t, ExitOK, r.code, r.stderr)

			db.FailNextCommit(interrupted, applied)
			r = runCLI(t, db, nil, args("pop", "tasks", "-n", "2")...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			assert.Equal(t, "report\nemail\n", r.stdout)

			r = runCLI(t, db, nil, args("list", "jobs", "--json")...)
			assert.JSONEq(t, `[{"index":2,"value":"resize img-2"},{"index":3,"value":"send welcome email"},{"index":4,"value":"once"}]`, r.stdout)

			// A cancel that went through is reported, not failed with
			// ErrJobNotFound by its retry.
			db.FailNextCommit(interrupted, applied)
			r = runCLI(t, db, nil, work("cancel", leasedDemoID)...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			assert.Equal(t, `cancelled job `+leasedDemoID+` in ("demo", "work")`+"\n", r.stdout)
			assert.ErrorIs(t, runErr(db, work("job", leasedDemoID)...), fdbqueue.ErrJobNotFound)
		})
	}
}
