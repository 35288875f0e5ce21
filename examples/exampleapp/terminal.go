package exampleapp

import (
	"io"
	"os"
)

// TerminalProgress returns f when it is a terminal (a character device),
// and nil otherwise: a live progress line redraws itself with carriage
// returns, which only a terminal shows as one line; redirected to a file
// or a pipe (CI logs) it would be hundreds of lines of noise.
func TerminalProgress(f *os.File) io.Writer {
	if f == nil {
		return nil
	}
	if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return f
	}
	return nil
}
