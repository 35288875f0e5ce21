package memdb

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/stretchr/testify/require"
)

// stampArg is a SetVersionstampedKey argument: body with its stamp offset.
func stampArg(body []byte, off int) []byte {
	return binary.LittleEndian.AppendUint32(bytes.Clone(body), uint32(off))
}

// TestStampRangeBounds: the range a versionstamped key may land in is
// built in one buffer, and equals FDB's getVersionstampKeyRange
// (fdbclient/include/fdbclient/Atomic.h) with FDB 7.3's arguments: the
// template with the read version (or 0 without one) and order 0 at the
// offset, up to just after the template with ten 0xff bytes there, capped
// at the end of the user key space.
func TestStampRangeBounds(t *testing.T) {
	db := New()
	defer db.Close()
	// A read version that is not 0.
	require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
		tr.Set([]byte("x"), []byte("y"))
		return nil
	}))
	for _, tc := range []struct {
		name    string
		body    []byte
		off     int
		rv      bool
		wantEnd []byte // nil: template with 0xff bytes, then \x00
	}{
		{"no read version", []byte("head/0123456789/tail"), 5, false, nil},
		{"with read version", []byte("head/0123456789/tail"), 5, true, nil},
		{"stamp first, capped at \\xff", []byte("0123456789tail"), 0, true, maxUserKey},
		{"stamp last", []byte("head0123456789"), 4, false, nil},
		{"stamp only, capped at \\xff", []byte("0123456789"), 0, false, maxUserKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx := newTxT(t, db)
			if tc.rv {
				_, err := tx.GetReadVersion().Get()
				require.NoError(t, err)
			}
			tx.SetVersionstampedKey(stampArg(tc.body, tc.off), []byte("v"))
			require.Len(t, tx.x.unreadable, 1)
			got := tx.x.unreadable[0]
			var lo [10]byte
			if tc.rv {
				binary.BigEndian.PutUint64(lo[:8], uint64(tx.rv))
				require.NotZero(t, tx.rv)
			}
			var hi [10]byte
			for i := range hi {
				hi[i] = 0xff
			}
			require.Equal(t, stamped(tc.body, tc.off, lo), got.b, "begin")
			wantEnd := tc.wantEnd
			if wantEnd == nil {
				wantEnd = keyAfter(stamped(tc.body, tc.off, hi))
			}
			require.Equal(t, wantEnd, got.e, "end")
			require.Equal(t, stampArg(stamped(tc.body, tc.off, lo), tc.off), tx.x.vsKeys[0].at,
				"the write's point in FDB's write map: the argument with the range's beginning's stamp")
			require.Equal(t, tc.body, tx.x.vsKeys[0].tmpl, "the template is untouched by the bounds")
			require.Equal(t, len(tc.body), cap(tx.x.vsKeys[0].tmpl), "appending to the template cannot reach the bounds")
		})
	}
}

// TestVersionstampedKeyChecks: a versionstamped key's argument, the
// template with its 4-byte offset, is checked as given before a stamp is
// placed, as ReadYourWritesTransaction::atomicOp (fdbclient/
// ReadYourWrites.actor.cpp) checks it: the legal range (key >= getMaxWriteKey()),
// then the size (key.size() > getMaxWriteKeySize), then the offset
// (getVersionstampKeyRange, Atomic.h).
func TestVersionstampedKeyChecks(t *testing.T) {
	db := New()
	defer db.Close()
	for _, tc := range []struct {
		name string
		body []byte
		off  int
		want error
	}{
		{"legal", []byte("k0123456789"), 1, nil},
		{"\\xff first", []byte("\xff0123456789"), 1, kv.ErrKeyOutsideLegalRange},
		{"\\xff placeholder first", []byte("\xff123456789"), 0, kv.ErrKeyOutsideLegalRange},
		{"largest key", bytes.Repeat([]byte{'k'}, maxKeySize-4), 3, nil},
		{"too large with its offset", bytes.Repeat([]byte{'k'}, maxKeySize-3), 3, kv.ErrKeyTooLarge},
		{"\\xff and too large", append([]byte{0xff}, bytes.Repeat([]byte{'k'}, maxKeySize)...), 3, kv.ErrKeyOutsideLegalRange},
		{"offset past the end", []byte("k012345678"), 1, kv.ErrClientInvalidOp},
		{"too large and offset past the end", bytes.Repeat([]byte{'k'}, maxKeySize), maxKeySize, kv.ErrKeyTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx := newTxT(t, db)
			tx.SetVersionstampedKey(stampArg(tc.body, tc.off), []byte("v"))
			err := tx.Commit()
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// TestVersionstampedKeyRangeBeginsAtReadVersion: in FDB 7.3 the range a
// versionstamped key may land in begins at the template stamped with the
// read version itself and batch order 0 (ReadYourWritesTransaction::
// atomicOp, fdbclient/ReadYourWrites.actor.cpp at release-7.3:
// getVersionstampKeyRange(arena, k, tr.getCachedReadVersion().orDefault(0),
// ...)); the version after it (readVersion.map(v + 1)) is FDB 7.4's, from
// apple/foundationdb#11424. So the key a commit at the read version
// stamped, memdb's last commit, is unreadable; one stamped before it is
// not.
func TestVersionstampedKeyRangeBeginsAtReadVersion(t *testing.T) {
	db := New()
	defer db.Close()
	body := []byte("vs/0123456789")
	arg := stampArg(body, 3)
	var stamps [][10]byte
	for range 2 {
		tx := newTxT(t, db)
		tx.SetVersionstampedKey(arg, []byte("v"))
		require.NoError(t, tx.Commit())
		cv, err := tx.GetCommittedVersion()
		require.NoError(t, err)
		stamps = append(stamps, versionstamp(cv))
	}
	tx := newTxT(t, db)
	rv, err := tx.GetReadVersion().Get()
	require.NoError(t, err)
	require.Equal(t, versionstamp(rv), stamps[1], "memdb reads at its last commit")
	tx.SetVersionstampedKey(arg, []byte("v"))
	require.Equal(t, stamped(body, 3, stamps[1]), tx.x.unreadable[0].b, "the range begins at the read version's stamp")
	kvs, err := tx.GetRange(kv.KeyRange{Begin: []byte("vs/"), End: []byte("vs0")}, kv.RangeOptions{Limit: 1}).GetSlice()
	require.NoError(t, err, "a key stamped before the read version is readable")
	require.Len(t, kvs, 1)
	require.Equal(t, stamped(body, 3, stamps[0]), kvs[0].Key)
	_, err = tx.Get(stamped(body, 3, stamps[1])).Get()
	require.ErrorIs(t, err, kv.ErrAccessedUnreadable, "the key stamped at the read version is in the range")
}

// TestClearSplitsUnreadableRange: a clear inside the range a versionstamped
// key may land in makes just the part it covers readable (FDB's
// WriteMap::clear inserts a readable entry at its beginning and keeps the
// unreadable one at its end), a Clear of one key just that key, and neither
// drops the write, whose point in the write map they miss.
func TestClearSplitsUnreadableRange(t *testing.T) {
	db := New()
	defer db.Close()
	body := []byte("vs/0123456789/t")
	tx := newTxT(t, db)
	tx.SetVersionstampedKey(stampArg(body, 3), []byte("v"))
	r := tx.x.unreadable[0]
	at := tx.x.vsKeys[0].at
	mid := []byte("vs/\x80")
	tx.ClearRange(kv.KeyRange{Begin: keyAfter(at), End: mid})
	tx.Clear(r.b)
	require.Equal(t, []krange{{keyAfter(r.b), keyAfter(at)}, {mid, r.e}}, tx.x.unreadable,
		"what is left of the range: from after the cleared beginning to the write's point, and from the ClearRange's end")
	for _, tc := range []struct {
		key  []byte
		want error
	}{
		{r.b, nil},
		{at, kv.ErrAccessedUnreadable},
		{keyAfter(at), nil},
		{[]byte("vs/\x7f"), nil},
		{mid, kv.ErrAccessedUnreadable},
		{[]byte("vs/\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff/t"), kv.ErrAccessedUnreadable},
	} {
		v, err := tx.Get(tc.key).Get()
		if tc.want == nil {
			require.NoError(t, err, "%q", tc.key)
			require.Nil(t, v, "%q is cleared", tc.key)
		} else {
			require.ErrorIs(t, err, tc.want, "%q", tc.key)
		}
	}
	require.Len(t, tx.x.vsKeys, 1, "the clears miss the write's point")
}
