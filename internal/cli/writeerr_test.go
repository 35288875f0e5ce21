package cli

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// failAfter accepts n bytes, then fails every write (a full disk, a closed
// terminal).
type failAfter struct{ n int }

var errFull = errors.New("no space left on device")

func (w *failAfter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errFull
	}
	w.n -= len(p)
	return len(p), nil
}

// A listing whose output cannot be written fails (exit 1), in text as in
// JSON: the exit code must not say a truncated listing was complete.
func TestListingOutputErrorFails(t *testing.T) {
	db := demoDB(t)
	for _, a := range [][]string{
		args("list", "tasks"),
		args("list", "tasks", "--json"),
		args("peek", "tasks", "--limit", "3"),
		{"dead", "--queue", "demo/work"},
		work("job", dueDemoID),
		work("job", dueDemoID, "--json"),
		work("cancel", "--dry-run", dueDemoID),
		// Last: they remove what they fail to print. The exit code is
		// then all that says the item is gone unseen.
		args("pop", "tasks", "-n", "2"),
		args("pop", "tasks", "--json"),
		work("cancel", dueDemoID),
	} {
		r := runCLI(t, db, func(e *Env) { e.Stdout = &failAfter{n: 10} }, a...)
		assert.Equal(t, ExitFailure, r.code, "%q", a)
		assert.Contains(t, r.stderr, errFull.Error(), "%q", a)
	}
}
