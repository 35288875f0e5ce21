package tuplediff_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/apple/foundationdb/bindings/go/src/fdb"
	"github.com/apple/foundationdb/bindings/go/src/fdb/subspace"
	ftuple "github.com/apple/foundationdb/bindings/go/src/fdb/tuple"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// rangeKeys returns the bounds of one of the binding's exact ranges.
func rangeKeys(r fdb.ExactRange) (begin, end []byte) {
	b, e := r.FDBRangeKeys()
	return b.FDBKey(), e.FDBKey()
}

func sameRange(t *testing.T, name string, ours kv.KeyRange, begin, end []byte) {
	t.Helper()
	if !bytes.Equal(ours.Begin, begin) || !bytes.Equal(ours.End, end) {
		t.Errorf("%s: ranges differ:\n ours    [%x, %x)\n binding [%x, %x)", name, ours.Begin, ours.End, begin, end)
	}
}

// rawPrefixes are the raw prefixes the range tests use besides random ones:
// empty, all 0xff (no successor), trailing 0xff, and 0xfe 0xff (which a
// UTF-8-minded trim would get wrong).
var rawPrefixes = [][]byte{
	nil, {}, {0x00}, {0xff}, {0xff, 0xff}, {0xff, 0xff, 0xff}, {0x01, 0xff}, {0x00, 0xff, 0xff},
	{0xfe}, {0xfe, 0xff}, {0xff, 0xfe, 0xff}, []byte("app\x00"), []byte("\x15\x01"),
}

// TestStrincAndPrefixRangeAgree: our Strinc and PrefixRange equal
// fdb.Strinc and fdb.PrefixRange on every prefix, and both sides fail on
// exactly the same ones (empty or all 0xff), ours with ErrNoSuccessor.
func TestStrincAndPrefixRangeAgree(t *testing.T) {
	g := newGen(4)
	prefixes := rawPrefixes
	for range 2000 {
		prefixes = append(prefixes, g.prefix())
	}
	for _, p := range prefixes {
		name := fmt.Sprintf("prefix %x", p)
		ours, oerr := tuple.Strinc(p)
		theirs, ferr := fdb.Strinc(p)
		if (oerr != nil) != (ferr != nil) || !bytes.Equal(ours, theirs) {
			t.Errorf("%s: Strinc: ours %x, %v; binding %x, %v", name, ours, oerr, theirs, ferr)
		}
		if oerr != nil && !errors.Is(oerr, tuple.ErrNoSuccessor) {
			t.Errorf("%s: our Strinc: %v, want ErrNoSuccessor", name, oerr)
		}
		or, oerr := tuple.PrefixRange(p)
		fr, ferr := fdb.PrefixRange(p)
		if (oerr != nil) != (ferr != nil) {
			t.Errorf("%s: PrefixRange: ours %v, binding %v", name, oerr, ferr)
			continue
		}
		if oerr != nil {
			if !errors.Is(oerr, tuple.ErrNoSuccessor) {
				t.Errorf("%s: our PrefixRange: %v, want ErrNoSuccessor", name, oerr)
			}
			continue
		}
		sameRange(t, name+": PrefixRange", or, fr.Begin.FDBKey(), fr.End.FDBKey())
	}
}

// TestTupleAndSubspaceRangesAgree: Tuple.Range equals the binding's
// Tuple.FDBRangeKeys; our Subspace (from a tuple, from raw bytes, nested
// with Sub) has the binding's subspace's bytes, range, Sub, Pack, Unpack
// and Contains, and Subspace.Range(elems...) equals the binding's
// Sub(elems...).FDBRangeKeys(). Neither side fails on a prefix of all
// 0xff: a subspace range is [prefix+0x00, prefix+0xff), which exists for
// every prefix.
func TestTupleAndSubspaceRangesAgree(t *testing.T) {
	g := newGen(5)
	all := corpus()
	for i, tup := range all {
		name := fmt.Sprintf("tuple %d %v", i, tup)
		ftup := toFDB(tup)
		or, err := tup.Range()
		if err != nil {
			t.Fatalf("%s: our Range: %v", name, err)
		}
		b, e := rangeKeys(ftup)
		sameRange(t, name+": Tuple.Range", or, b, e)

		// A subspace made from the tuple, and one from raw bytes.
		ours, err := fdbqueue.NewSubspace(tup)
		if err != nil {
			t.Fatalf("%s: NewSubspace: %v", name, err)
		}
		checkSubspace(t, g, name, ours, subspace.Sub(ftup...))
		var raw []byte
		if i < len(rawPrefixes) {
			raw = rawPrefixes[i]
		} else {
			raw = g.prefix()
		}
		checkSubspace(t, g, fmt.Sprintf("raw prefix %x", raw), fdbqueue.SubspaceFromBytes(raw), subspace.FromBytes(raw))
	}
}

func checkSubspace(t *testing.T, g *gen, name string, ours fdbqueue.Subspace, theirs subspace.Subspace) {
	t.Helper()
	if !bytes.Equal(ours.Bytes(), theirs.Bytes()) {
		t.Errorf("%s: Bytes: ours %x, binding %x", name, ours.Bytes(), theirs.Bytes())
		return
	}
	or, err := ours.Range()
	if err != nil {
		t.Errorf("%s: Subspace.Range: %v", name, err)
		return
	}
	b, e := rangeKeys(theirs)
	sameRange(t, name+": Subspace.Range()", or, b, e)

	elems := g.tuple(0)
	fe := toFDB(elems)
	or, err = ours.Range(elems...)
	if err != nil {
		t.Errorf("%s: Subspace.Range(%v): %v", name, elems, err)
		return
	}
	b, e = rangeKeys(theirs.Sub(fe...))
	sameRange(t, fmt.Sprintf("%s: Subspace.Range(%v)", name, elems), or, b, e)

	sub, err := ours.Sub(elems...)
	if err != nil || !bytes.Equal(sub.Bytes(), theirs.Sub(fe...).Bytes()) {
		t.Errorf("%s: Sub(%v): ours %x, %v; binding %x", name, elems, sub.Bytes(), err, theirs.Sub(fe...).Bytes())
	}

	key, err := ours.Pack(elems)
	if err != nil || !bytes.Equal(key, theirs.Pack(fe)) {
		t.Errorf("%s: Pack(%v): ours %x, %v; binding %x", name, elems, key, err, []byte(theirs.Pack(fe)))
		return
	}
	ou, err := ours.Unpack(key)
	fu, ferr := theirs.Unpack(fdb.Key(key))
	if err != nil || ferr != nil || canon(ou, true) != canon(fu, true) || canon(ou, false) != canon(elems, false) {
		t.Errorf("%s: Unpack(%x): ours %v, %v; binding %v, %v", name, key, ou, err, fu, ferr)
	}
	if !ours.Contains(key) || !theirs.Contains(fdb.Key(key)) {
		t.Errorf("%s: Contains(%x): ours %v, binding %v", name, key, ours.Contains(key), theirs.Contains(fdb.Key(key)))
	}

	// A key in the subspace whose remainder is no tuple (an unterminated
	// byte string): ours ErrMalformedKey wrapping tuple.ErrMalformed, the
	// binding an error or (it reads past the end) a panic.
	p := ours.Bytes()
	bad := append(bytes.Clone(p), 0x01, 'x')
	if _, err := ours.Unpack(bad); !errors.Is(err, fdbqueue.ErrMalformedKey) || !errors.Is(err, tuple.ErrMalformed) {
		t.Errorf("%s: Unpack(%x): %v, want ErrMalformedKey and tuple.ErrMalformed", name, bad, err)
	}
	if u, err := fdbSubspaceUnpack(theirs, bad); err == nil {
		t.Errorf("%s: the binding's Unpack(%x) = %v, want an error", name, bad, u)
	}

	// A key just outside: the prefix with its last byte changed, or a
	// shorter key.
	if len(p) == 0 {
		return
	}
	out := bytes.Clone(p)
	out[len(out)-1] ^= 0x01
	for _, k := range [][]byte{out, p[:len(p)-1]} {
		if ours.Contains(k) || theirs.Contains(fdb.Key(k)) {
			t.Errorf("%s: Contains(%x): ours %v, binding %v, want false", name, k, ours.Contains(k), theirs.Contains(fdb.Key(k)))
		}
		_, oerr := ours.Unpack(k)
		_, ferr := theirs.Unpack(fdb.Key(k))
		if !errors.Is(oerr, fdbqueue.ErrKeyOutsideSubspace) || ferr == nil {
			t.Errorf("%s: Unpack(%x) outside: ours %v (want ErrKeyOutsideSubspace), binding %v", name, k, oerr, ferr)
		}
	}
}

// fdbSubspaceUnpack is the binding's Subspace.Unpack, with its panics
// turned into an error.
func fdbSubspaceUnpack(s subspace.Subspace, key []byte) (t ftuple.Tuple, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("binding's Unpack panicked: %v", r)
		}
	}()
	return s.Unpack(fdb.Key(key))
}
