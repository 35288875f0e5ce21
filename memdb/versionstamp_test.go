package memdb_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/stretchr/testify/require"
)

// vsKey returns prefix + 10 placeholder bytes + user suffix + offset.
func vsKey(prefix, suffix string) []byte {
	k := append([]byte(prefix), make([]byte, 10)...)
	k = append(k, suffix...)
	return binary.LittleEndian.AppendUint32(k, uint32(len(prefix)))
}

func TestVersionstamps(t *testing.T) {
	db, clk := newDB(t)
	var stamps [][]byte
	for i := range 5 {
		tr := newTx(t, db)
		tr.SetVersionstampedKey(vsKey("log/", "!"), []byte{byte(i)})
		val := append([]byte("v:"), make([]byte, 10)...)
		tr.SetVersionstampedValue([]byte("last"), binary.LittleEndian.AppendUint32(val, 2))
		f := tr.GetVersionstamp()
		require.NoError(t, tr.Commit())
		stamp, err := f.Get()
		require.NoError(t, err)
		require.Len(t, stamp, 10)
		cv, err := tr.GetCommittedVersion()
		require.NoError(t, err)
		require.Equal(t, uint64(cv), binary.BigEndian.Uint64(stamp[:8]), "8-byte big-endian commit version")
		require.Equal(t, []byte{0, 0}, stamp[8:], "then the 2-byte batch order")
		stamps = append(stamps, stamp)
		last, _ := mustGet(t, db, "last")
		require.Equal(t, append([]byte("v:"), stamp...), []byte(last), "the value's placeholder holds the stamp")
		clk.Advance(7) // not even a microsecond: versions still increase
	}
	for i := 1; i < len(stamps); i++ {
		require.Equal(t, 1, bytes.Compare(stamps[i], stamps[i-1]), "versionstamps increase with every commit")
	}
	tr := newTx(t, db)
	kvs, err := tr.GetRange(rng("log/", "log0"), kv.RangeOptions{}).GetSlice()
	require.NoError(t, err)
	require.Len(t, kvs, 5)
	for i, p := range kvs {
		require.Equal(t, append(append([]byte("log/"), stamps[i]...), '!'), p.Key, "keys sort in commit order")
		require.Equal(t, []byte{byte(i)}, p.Value)
	}
}

func TestVersionstampErrors(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	f := tr.GetVersionstamp()
	require.NoError(t, tr.Commit())
	_, err := f.Get()
	require.Error(t, err, "a transaction that wrote nothing has no versionstamp")

	tr = newTx(t, db)
	tr.SetVersionstampedKey([]byte("short\x05\x00\x00\x00"), []byte("v"))
	require.ErrorIs(t, tr.Commit(), kv.ErrClientInvalidOp, "an offset past the key is invalid")

	db.FailNextCommit(kv.ErrNotCommitted, false)
	tr = newTx(t, db)
	tr.SetVersionstampedKey(vsKey("a", ""), []byte("v"))
	f = tr.GetVersionstamp()
	require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted)
	_, err = f.Get()
	// With transaction_invalid_version, whatever the commit failed with
	// (Transaction::commitAndWatch, fdbclient/NativeAPI.actor.cpp).
	require.ErrorIs(t, err, kv.Error{Code: 2020}, "a failed commit fails its versionstamp")
}
