package memdb

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadersOldest: the registry answers the oldest registered read
// version, counts transactions sharing one, drops those out of the window
// and ignores their later unregistration.
func TestReadersOldest(t *testing.T) {
	var r readers
	var latest atomic.Int64
	reg := func(v int64) int64 {
		latest.Store(v)
		return r.register(&latest)
	}
	require.Equal(t, int64(50), r.oldest(0, 50), "none registered: the latest")
	reg(10)
	reg(10)
	reg(20)
	reg(30)
	require.Equal(t, 4, r.len())
	require.Equal(t, int64(10), r.oldest(0, 40))
	r.unregister(10)
	require.Equal(t, int64(10), r.oldest(0, 40), "one of the two at 10 remains")
	r.unregister(20)
	r.unregister(10)
	require.Equal(t, int64(30), r.oldest(0, 40))
	require.Equal(t, int64(25), r.oldest(0, 25), "never after the latest")
	require.Equal(t, int64(40), r.oldest(35, 40), "30 is out of the window")
	require.Equal(t, 0, r.len())
	r.unregister(30) // dropped already: ignored
	require.Equal(t, 0, r.len())

	// Many registrations released out of order: the front compacts.
	for v := int64(100); v < 1100; v++ {
		reg(v)
	}
	for v := int64(1099); v >= 100; v -= 2 {
		r.unregister(v)
	}
	require.Equal(t, 500, r.len())
	for v := int64(100); v < 1100; v += 2 {
		require.Equal(t, v, r.oldest(0, 2000))
		r.unregister(v)
	}
	require.Equal(t, 0, r.len())
	require.Equal(t, int64(2000), r.oldest(0, 2000))
	require.LessOrEqual(t, len(r.rvs), 1)
}
