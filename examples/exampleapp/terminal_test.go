package exampleapp

import (
	"os"
	"path/filepath"
	"testing"
)

// A file (as when standard error is redirected) gets no progress line.
func TestTerminalProgressOffForFiles(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if w := TerminalProgress(f); w != nil {
		t.Fatalf("a regular file got a progress writer")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if TerminalProgress(w) != nil {
		t.Fatalf("a pipe got a progress writer")
	}
	if TerminalProgress(nil) != nil {
		t.Fatalf("nil got a progress writer")
	}
	// A character device that is not a terminal still passes the check;
	// /dev/null is one, so the check is "character device", as documented.
	if dn, err := os.Open(os.DevNull); err == nil {
		defer dn.Close()
		if TerminalProgress(dn) == nil {
			t.Logf("%s is not a character device here", os.DevNull)
		}
	}
}
