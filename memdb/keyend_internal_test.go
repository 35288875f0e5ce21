package memdb

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/stretchr/testify/require"
)

// A key stored by a Set or by a versionstamped key has key+\x00 in its
// chain's memory (chain.hasEnd), which a later Clear of it shares; one
// stored by an atomic operation on a missing key is a copy without it.
// Either way the Clear's entry has key+\x00 as its end.
func TestChainKeyEnds(t *testing.T) {
	db := New()
	defer db.Close()
	ctx := context.Background()
	vs := binary.LittleEndian.AppendUint32(append([]byte("v/"), make([]byte, 10)...), 2)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set([]byte("s"), []byte("value"))
		tr.Add([]byte("a"), []byte{1})
		tr.SetVersionstampedKey(vs, []byte("value"))
		return nil
	}))
	var stamped []byte
	db.st.liveTree.Scan(func(k string, c *chain) bool {
		if k[0] == 'v' {
			stamped = c.key
		}
		return true
	})
	for key, hasEnd := range map[string]bool{"s": true, "a": false, string(stamped): true} {
		c := db.st.lookup([]byte(key))
		require.NotNil(t, c, "%q", key)
		require.Equal(t, hasEnd, c.hasEnd(), "%q", key)

		tr, err := db.newTransaction(ctx)
		require.NoError(t, err)
		_, err = tr.Get([]byte(key)).Get()
		require.NoError(t, err)
		tr.Clear([]byte(key))
		e := tr.writes.get([]byte(key))
		require.NotNil(t, e)
		require.Equal(t, hasEnd, &e.key[0] == &c.key[0], "%q: the entry shares the chain's key", key)
		require.Equal(t, append([]byte(key), 0), e.end(), "%q", key)
		require.NoError(t, tr.Commit())
		_, ok := db.st.latest([]byte(key))
		require.False(t, ok, "%q", key)
	}
}
