package memdb

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestChainPruneKeepsArraysBounded: a hot key's chain is pruned from the
// front without copying, but its array stays proportional to what it
// holds, including once the key goes cold.
func TestChainPruneKeepsArraysBounded(t *testing.T) {
	s := newStore()
	key := []byte("k")
	const window = 100
	for v := int64(1); v <= 10_000; v++ {
		s.write(key, []byte("x"), true, v, v-window)
		c := s.lookup(key)
		require.LessOrEqual(t, len(c.vers), window+1)
		require.LessOrEqual(t, int(c.arr), 4*(window+1))
		require.Equal(t, int64(len(c.vers)), s.versions)
		require.Equal(t, v, c.vers[len(c.vers)-1].v)
		if v > window {
			val, ok := c.at(v - window)
			require.True(t, ok, "a reader at the horizon sees the value")
			require.Equal(t, "x", string(val))
		}
	}
	c := s.lookup(key)
	// Readers at the horizon still see the newest version at or below it.
	s.write(key, nil, false, 20_000, 19_999)
	require.Len(t, c.vers, 2, "the old value (for readers at the horizon) and the tombstone")
	require.LessOrEqual(t, int(c.arr), 8, "a chain left with little moves to a small array")
	_, ok := c.at(19_999)
	require.True(t, ok)
	_, ok = c.at(20_000)
	require.False(t, ok)
	require.Equal(t, int64(2), s.versions)
	s.gc(30_000)
	require.True(t, c.dead())
	require.Nil(t, s.lookup(key))
	require.Equal(t, int64(0), s.versions)
	require.Equal(t, int64(0), s.live)
}

// An atomic entry holds its small key in its own memory; the chain that
// its commit creates keeps a copy, not the entry.
func TestAtomicEntryKeyIsCopiedForTheStore(t *testing.T) {
	db := New()
	defer db.Close()
	tx, err := db.newTransaction(context.Background())
	require.NoError(t, err)
	key := []byte("counter")
	tx.Add(key, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	e := tx.writes.get(key)
	require.NotNil(t, e)
	require.True(t, e.inline, "a small atomic entry holds its key")
	require.NoError(t, tx.Commit())
	c := db.st.lookup(key)
	require.NotNil(t, c)
	require.NotSame(t, &e.key[0], &c.key[0], "the chain has its own copy of the key")
	require.Equal(t, key, c.key)
}

// TestHotKeyReusesItsArray: a key written at every commit whose readers
// need only its newest versions (the horizon right behind) keeps the
// array it was created with: prune drops entries from the front and the
// next write moves the rest back rather than allocating a new array.
func TestHotKeyReusesItsArray(t *testing.T) {
	s := newStore()
	key := []byte("counter")
	s.write(key, []byte{1}, true, 1, 0)
	c := s.lookup(key)
	first := &c.array()[0]
	for v := int64(2); v <= 1000; v++ {
		s.write(key, []byte{byte(v)}, true, v, v-1)
		require.Len(t, c.vers, 2, "the value at the horizon and the new one")
		require.Equal(t, []byte{byte(v - 1)}, must(c.at(v-1)))
		require.Equal(t, []byte{byte(v)}, must(c.at(v)))
	}
	require.Equal(t, int32(2), c.arr)
	require.Same(t, first, &c.array()[0], "no new array")
	val := []byte{1}
	allocs := testing.AllocsPerRun(100, func() {
		v := c.vers[len(c.vers)-1].v + 1
		s.write(key, val, true, v, v-1)
	})
	require.Zero(t, allocs)
}

func must(b []byte, ok bool) []byte {
	if !ok {
		return nil
	}
	return b
}

// TestSetClearCollectAllocatesOnlyTheChain: a key set, cleared and
// collected at once (a queue's item when no reader needs it) costs its
// chain's allocation and nothing else: the dead index's log reuses its
// array.
func TestSetClearCollectAllocatesOnlyTheChain(t *testing.T) {
	s := newStore()
	key, val := []byte("item"), []byte("x")
	s.write([]byte("other"), val, true, 1, 0) // so that liveTree keeps its root
	v := int64(1)
	cycle := func() {
		s.write(key, val, true, v+1, v)
		s.write(key, nil, false, v+2, v+1)
		s.gc(v + 2)
		v += 2
	}
	for range 10 {
		cycle()
	}
	require.Nil(t, s.lookup(key))
	require.Equal(t, 1.0, testing.AllocsPerRun(100, cycle))
}

// chainFor finds every key's chain through store.hot as a lookup would:
// keys sharing a slot, chains removed since they were cached (a key
// cleared and collected), and a key stored anew after that.
func TestChainForHotSlots(t *testing.T) {
	s := newStore()
	var keys [][]byte
	for i := range 40 {
		keys = append(keys, []byte{'c', byte(i / 8), byte(i)}) // several per slot
	}
	v := int64(0)
	check := func(what string) {
		t.Helper()
		for _, k := range keys {
			require.Same(t, s.lookup(k), s.chainFor(nil, k), "%s: %q", what, k)
		}
	}
	for round := range 3 {
		for _, k := range keys {
			v++
			s.write(k, []byte("x"), true, v, v-1)
		}
		check("written")
		for i, k := range keys {
			if i%3 == round {
				v++
				require.True(t, s.writeAt(s.chainFor(nil, k), k, nil, false, v, v-1))
			}
		}
		v++
		s.gc(v) // removes the cleared keys' chains
		check("cleared")
		for i, k := range keys {
			if i%3 == round {
				require.Nil(t, s.chainFor(nil, k), "%q was collected", k)
			}
		}
	}
	// A key's chain cached, then collected, then the key stored anew.
	k := keys[0]
	v++
	s.write(k, []byte("x"), true, v, v-1)
	old := s.chainFor(nil, k)
	v++
	require.True(t, s.writeAt(s.chainFor(nil, k), k, nil, false, v, v-1))
	v++
	s.gc(v)
	require.Nil(t, s.chainFor(nil, k), "the cached chain was collected")
	v++
	s.write(k, []byte("y"), true, v, v-1)
	require.NotSame(t, old, s.chainFor(nil, k))
	require.Same(t, s.lookup(k), s.chainFor(nil, k))
}
