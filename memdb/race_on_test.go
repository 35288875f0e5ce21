//go:build race

package memdb_test

// raceEnabled reports whether the race detector is on; it changes
// allocation counts, so allocation pins are skipped under it.
const raceEnabled = true
