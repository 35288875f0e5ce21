package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// list reads a queue's range by the documented key layout (docs/design.md)
// and shows every key that is not an item of that layout as "not an item",
// with why, not skipped and not taken for an item: the keys the layers'
// own parse refuses (queue.go parseIndexed and checkItemKey,
// priorityqueue.go parse). Planted among the demo queues' items: keys with
// an element of the wrong type (the random suffix included), too few or too
// many elements, an integer beyond int64, keys of the other layouts, and
// bytes that are no tuple. The good items, a planted one included, are
// listed as before, in key order.
func TestListFlagsEveryMalformedKey(t *testing.T) {
	r := []byte("random-suffix")
	vs := tuple.Versionstamp{TransactionVersion: [10]byte{0xff, 0, 0, 0, 0, 0, 0, 0, 0, 1}, UserVersion: 2}
	tupleValue := func(v string) []byte {
		b, err := tuple.Tuple{v}.Pack()
		require.NoError(t, err)
		return b
	}
	cases := []struct {
		queue string      // demoFlags name
		good  tuple.Tuple // a well-formed key planted too; it sorts last
		bad   []tuple.Tuple
		value func(string) []byte // the value as the queue's encoding stores it
	}{
		{
			queue: "jobs",
			good:  tuple.Tuple{int64(7), r},
			bad: []tuple.Tuple{
				{"not-an-index"},
				{int64(7)},                       // no random suffix
				{int64(7), "random-as-a-string"}, // suffix of the wrong type
				{int64(7), nil},
				{int64(7), r, "extra"},
				{"7", r},
				{uint64(1 << 63), r},    // beyond int64
				{vs, r},                 // versionstamp layout
				{int64(1), int64(2), r}, // priority layout
			},
			value: func(v string) []byte { return []byte(v) },
		},
		{
			queue: "tasks",
			good:  tuple.Tuple{int64(100), int64(0), r},
			bad: []tuple.Tuple{
				{int64(1)},
				{int64(1), int64(2)}, // no random suffix
				{int64(1), int64(2), "random-as-a-string"},
				{int64(1), int64(2), int64(3)},
				{int64(1), int64(2), r, "extra"},
				{int64(1), "2", r},
				{"1", int64(2), r},
				{int64(1), uint64(1 << 63), r},
				{int64(1), r}, // indexed layout
				{vs, r},       // versionstamp layout
			},
			value: func(v string) []byte { return []byte(v) },
		},
		{
			queue: "events",
			good:  tuple.Tuple{vs, r},
			bad: []tuple.Tuple{
				{vs}, // no random suffix
				{vs, "random-as-a-string"},
				{vs, r, "extra"},
				{int64(1), r}, // indexed layout
				{int64(1), int64(2), r},
				{"vs", r},
			},
			value: tupleValue,
		},
	}
	for _, c := range cases {
		t.Run(c.queue, func(t *testing.T) {
			db := demoDB(t)
			a := args("list", c.queue, "--json", "--limit", "0")
			before := listValues(t, db, a...)
			sub := mustSub(t, "demo", demoFlags[c.queue][1][len("demo/"):])
			bad := map[string]bool{} // hex keys
			require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
				k, err := sub.Pack(c.good)
				require.NoError(t, err)
				tr.Set(k, c.value("planted"))
				for i, b := range c.bad {
					k, err := sub.Pack(b)
					require.NoError(t, err, "%v", b)
					tr.Set(k, c.value(fmt.Sprint("bad ", i)))
					bad[fmt.Sprintf("%x", k)] = true
				}
				// Bytes that are no tuple: a truncated integer, an
				// unterminated byte string.
				for _, raw := range [][]byte{{0x15}, {0x16, 0x01}, {0x01, 'x'}} {
					k := append(append([]byte{}, sub.Bytes()...), raw...)
					tr.Set(k, c.value("raw"))
					bad[fmt.Sprintf("%x", k)] = true
				}
				return nil
			}))

			r := runCLI(t, db, nil, a...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			var items []Item
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &items))
			var good []string
			flagged := map[string]bool{}
			for _, it := range items {
				if it.Foreign == "" {
					good = append(good, *it.Value)
					continue
				}
				assert.True(t, bad[it.KeyHex], "a planted malformed key: %s (%s)", it.KeyHex, it.Foreign)
				flagged[it.KeyHex] = true
			}
			assert.Equal(t, bad, flagged, "every malformed key is flagged")
			assert.Equal(t, append(before, "planted"), good, "the items, and only they, are listed as items")

			// The text form says the same, with each key.
			r = runCLI(t, db, nil, args("list", c.queue, "--limit", "0")...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			assert.Len(t, lines, len(items))
			n := 0
			for _, l := range lines {
				if strings.Contains(l, "  not an item (") {
					n++
					k := l[strings.LastIndex(l, "), key ")+len("), key "):]
					k = k[:strings.IndexByte(k, ' ')]
					assert.True(t, bad[k], "line %q", l)
				}
			}
			assert.Equal(t, len(bad), n)
		})
	}
}
