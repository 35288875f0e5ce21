package main

import (
	"os"
	"strings"
	"testing"
)

// The quick start runs.
func TestRuns(t *testing.T) { main() }

// The README's quick start is this program, word for word, so that what a
// newcomer copies compiles and runs.
func TestREADMEQuickStart(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "## Quick start\n")
	if !ok {
		t.Fatal("README has no Quick start section")
	}
	_, block, ok := strings.Cut(after, "```go\n")
	if !ok {
		t.Fatal("README's Quick start has no Go block")
	}
	block, _, _ = strings.Cut(block, "```\n")
	if block != string(src) {
		t.Errorf("README's Quick start differs from examples/quickstart/main.go; paste the file into it")
	}
}
