package memdb

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMetadataVersionHistoryKeepsWhatReadsCanSee bumps the metadata
// version many times with the horizon trailing behind and checks that a
// read at every version from the horizon on still sees the last bump at or
// before it, while the history stays short.
func TestMetadataVersionHistoryKeepsWhatReadsCanSee(t *testing.T) {
	var h mvHistory
	stampOf := func(v int64) [10]byte { return versionstamp(v) }
	require.Nil(t, h.at(5), "no bump yet: the key is absent")
	for v := int64(10); v <= 1000; v += 10 {
		horizon := v - 95
		h.bump(v, stampOf(v), horizon)
		require.LessOrEqual(t, len(h), 11, "bumps no read can see must be dropped")
		for rv := max(horizon, 10); rv <= v; rv++ {
			want := stampOf(rv / 10 * 10)
			require.Equal(t, want[:], h.at(rv), "read at %d after the bump at %d", rv, v)
		}
	}
}
