package cli

import (
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// settleFailsDB: Ctrl-C lands while the first commit is in flight (that
// commit applies, its outcome reported unknown), and settle's second call
// under the same ID fails with a maybe-committed error too (a cluster
// still unreachable within settleTimeout).
func settleFailsDB(t *testing.T, cancel context.CancelFunc) *commitHook {
	raw := demoDB(t)
	n := 0
	return &commitHook{DB: raw, hook: func(commit func() error) error {
		n++
		switch n {
		case 1:
			err := commit()
			cancel()
			if err != nil {
				return err
			}
			return kv.CommitInterrupted(context.Canceled)
		case 2:
			return kv.CommitInterrupted(errors.New("timed out"))
		}
		return commit()
	}}
}

// When settling fails too, what the operation removed is in its journal
// record, not printed: the error must say the operation may have taken
// effect and name its ID (docs/cli.md, Exit codes). (An audit of the CLI
// found the batch missing from --out with only the library's "call it
// again with WithOpID" to go by; the CLI has no way to settle by ID yet.)
func TestDrainNamesAnOperationItCouldNotSettle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := settleFailsDB(t, cancel)
	f := &fullFile{n: 1 << 20}
	var out, errb strings.Builder
	code := Run(ctx, args("drain", "jobs", "--out", "x"), Env{Stdout: &out, Stderr: &errb, Backend: testBackend{db},
		openOut: func(string) (io.WriteCloser, error) { return f, nil }})
	require.Equal(t, ExitFailure, code)
	require.Regexp(t, regexp.MustCompile(`operation [0-9a-f]{32} may have taken effect`), errb.String())
	require.Contains(t, errb.String(), "in its journal record, not printed")
}
