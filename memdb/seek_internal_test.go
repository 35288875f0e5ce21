package memdb

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRangeCursorSeekEdges: a cursor's seek finds the first chain at or
// after a key forwards and the last one before it in reverse, whether the
// key is before every stored key, after every one, between two or equal
// to one, and in an empty or one-key tree (seek tries the tree's first or
// last key before searching).
func TestRangeCursorSeekEdges(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 100} {
		s := newStore()
		var keys [][]byte
		for i := range n {
			k := fmt.Appendf(nil, "k%03d", 2*i+1) // odd numbers: room between
			keys = append(keys, k)
			s.write(k, []byte("v"), true, 1, 0)
		}
		probes := [][]byte{nil, []byte("a"), []byte("k"), []byte("z"), {0xfe}}
		for i := range 2*n + 2 {
			probes = append(probes, fmt.Appendf(nil, "k%03d", i))
		}
		for _, reverse := range []bool{false, true} {
			for _, p := range probes {
				var rc rangeCursor
				rc.init(s, nil, []byte{0xff}, 1, reverse)
				rc.seek(p)
				var want []byte
				for _, k := range keys {
					if reverse && bytes.Compare(k, p) < 0 {
						want = k // the last before p
					}
					if !reverse && bytes.Compare(k, p) >= 0 {
						want = k
						break
					}
				}
				var got []byte
				if rc.cur != nil {
					got = rc.cur.key
				}
				require.Equal(t, string(want), string(got), "n=%d reverse=%v seek %q", n, reverse, p)
				// The walk goes on from there in order.
				if rc.cur != nil {
					rc.step()
					i := bytes.Index(bytes.Join(keys, []byte{0}), want) / (len(want) + 1)
					if reverse {
						i--
					} else {
						i++
					}
					if i < 0 || i >= len(keys) {
						require.Nil(t, rc.cur, "past the last key")
					} else {
						require.NotNil(t, rc.cur)
						require.Equal(t, string(keys[i]), string(rc.cur.key))
					}
				}
				rc.release()
			}
		}
	}
}
