package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Without -out, a run writes into a new scratch directory (never into the
// working directory or docs/), says where, and prints no goal lines: the
// output is the measurements.
func TestRunWritesToScratchDirectory(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	wd := t.TempDir()
	t.Chdir(wd)
	var out bytes.Buffer
	o := options{duration: 20 * time.Millisecond, items: 20, seed: 1, consumers: []int{1}, producers: []int{1},
		modes: []string{"plain"}, batch: 4, feeders: 1}
	if err := run(o, &out); err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob(filepath.Join(tmp, "queuebench-*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("scratch directories %v (%v)", dirs, err)
	}
	for _, f := range []string{"dequeue.csv", "enqueue.csv", "queuebench.png"} {
		if _, err := os.Stat(filepath.Join(dirs[0], f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if left, _ := os.ReadDir(wd); len(left) != 0 {
		t.Errorf("wrote into the working directory: %v", left)
	}
	if !strings.Contains(out.String(), dirs[0]) {
		t.Errorf("the output does not name %s:\n%s", dirs[0], out.String())
	}
	if strings.Contains(strings.ToLower(out.String()), "goal") {
		t.Errorf("goal lines in the output:\n%s", out.String())
	}
}
