package tuplediff_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/apple/foundationdb/bindings/go/src/fdb/subspace"
	ftuple "github.com/apple/foundationdb/bindings/go/src/fdb/tuple"

	"github.com/fdbqueue/fdbqueue/tuple"
)

// randomTuples is how many random tuples each test adds to the edge table.
const randomTuples = 4000

// corpus is the edge table followed by random tuples (stream 1).
func corpus() []tuple.Tuple {
	out := edgeTuples()
	g := newGen(1)
	for range randomTuples {
		out = append(out, g.tuple(0))
	}
	return out
}

// TestPackAndUnpackAgree: for every tuple of the corpus, our Pack and the
// binding's give the same bytes, each side's Unpack reads the other's bytes
// back to the values packed (integers by value, floats bit for bit), and
// both Unpacks choose the same Go type for every integer (int64 up to
// MaxInt64, uint64 above it, *big.Int beyond 64 bits or below MinInt64).
func TestPackAndUnpackAgree(t *testing.T) {
	for i, tup := range corpus() {
		checkPackUnpack(t, fmt.Sprintf("tuple %d %v", i, tup), tup)
	}
}

func checkPackUnpack(t *testing.T, name string, tup tuple.Tuple) {
	t.Helper()
	ours, err := tup.Pack()
	if err != nil {
		t.Errorf("%s: our Pack: %v", name, err)
		return
	}
	theirs, err := fdbPack(toFDB(tup))
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if !bytes.Equal(ours, theirs) {
		t.Errorf("%s: packed differently:\n ours    %x\n binding %x", name, ours, theirs)
		return
	}
	want := canon(tup, false)
	ou, err, panicked := oursUnpack(theirs)
	if err != nil || panicked {
		t.Errorf("%s: our Unpack of the binding's %x: %v", name, theirs, err)
		return
	}
	fu, err, _ := fdbUnpack(ours)
	if err != nil {
		t.Errorf("%s: the binding's Unpack of our %x: %v", name, ours, err)
		return
	}
	if got := canon(ou, false); got != want {
		t.Errorf("%s: our Unpack of the binding's bytes = %s, want %s", name, got, want)
	}
	if got := canon(fu, false); got != want {
		t.Errorf("%s: the binding's Unpack of our bytes = %s, want %s", name, got, want)
	}
	if o, f := canon(ou, true), canon(fu, true); o != f {
		t.Errorf("%s: Unpack chose other Go types:\n ours    %s\n binding %s", name, o, f)
	}
}

// TestMaxDepthBoundary: a tuple nested MaxDepth deep packs and unpacks the
// same on both sides. One level deeper is a deliberate difference: ours
// refuses to pack it (ErrUnsupportedType) or unpack it (ErrMalformed), so
// that a cyclic tuple or a hostile key fails cleanly instead of exhausting
// the stack; the binding has no limit.
func TestMaxDepthBoundary(t *testing.T) {
	nest := func(depth int) tuple.Tuple {
		tup := tuple.Tuple{int64(1), nil}
		for range depth {
			tup = tuple.Tuple{tup, nil}
		}
		return tup
	}
	checkPackUnpack(t, "MaxDepth", nest(tuple.MaxDepth))

	deep := nest(tuple.MaxDepth + 1)
	if _, err := deep.Pack(); !errors.Is(err, tuple.ErrUnsupportedType) {
		t.Errorf("our Pack of a tuple nested MaxDepth+1 deep: %v, want ErrUnsupportedType", err)
	}
	theirs, err := fdbPack(toFDB(deep))
	if err != nil {
		t.Fatalf("the binding's Pack of a tuple nested MaxDepth+1 deep: %v", err)
	}
	if _, err := tuple.Unpack(theirs); !errors.Is(err, tuple.ErrMalformed) {
		t.Errorf("our Unpack of a tuple nested MaxDepth+1 deep: %v, want ErrMalformed", err)
	}
	if fu, err, _ := fdbUnpack(theirs); err != nil || canon(fu, false) != canon(deep, false) {
		t.Errorf("the binding's Unpack of a tuple nested MaxDepth+1 deep: %v", err)
	}
}

// TestPackRejects: where the binding's Pack panics, ours returns a typed
// error. The last rows are the Go integer types only ours accepts; toFDB
// maps them to int64 or uint64 for the binding.
func TestPackRejects(t *testing.T) {
	huge := new(big.Int).Lsh(bigOne, 8*255) // 2^2040: 256 bytes, one too many
	cases := []struct {
		name string
		tup  tuple.Tuple
		want error // nil: ours packs it
	}{
		{"unsupported type", tuple.Tuple{struct{}{}}, tuple.ErrUnsupportedType},
		{"nested unsupported type", tuple.Tuple{tuple.Tuple{nil, []int{1}}}, tuple.ErrUnsupportedType},
		{"nil *big.Int", tuple.Tuple{(*big.Int)(nil)}, tuple.ErrUnsupportedType},
		{"2^2040", tuple.Tuple{huge}, tuple.ErrUnsupportedType},
		{"-2^2040", tuple.Tuple{new(big.Int).Neg(huge)}, tuple.ErrUnsupportedType},
		{"incomplete versionstamp", tuple.Tuple{tuple.IncompleteVersionstamp(1)}, tuple.ErrVersionstamp},
		{"nested incomplete versionstamp", tuple.Tuple{tuple.Tuple{tuple.IncompleteVersionstamp(0)}}, tuple.ErrVersionstamp},
		{"int8", tuple.Tuple{int8(-1)}, nil},
		{"int16", tuple.Tuple{int16(-300)}, nil},
		{"int32", tuple.Tuple{int32(70000)}, nil},
		{"uint8", tuple.Tuple{uint8(255)}, nil},
		{"uint16", tuple.Tuple{uint16(256)}, nil},
		{"uint32", tuple.Tuple{uint32(1 << 31)}, nil},
	}
	for _, c := range cases {
		// The narrow integer types as they are, not as toFDB maps them:
		// the binding panics on them.
		raw := make(ftuple.Tuple, len(c.tup))
		for i, e := range c.tup {
			switch e.(type) {
			case int8, int16, int32, uint8, uint16, uint32:
				raw[i] = e
			default:
				raw[i] = elemToFDB(e)
			}
		}
		if _, err := fdbPack(raw); err == nil || !strings.Contains(err.Error(), "panicked") {
			t.Errorf("%s: the binding's Pack: %v, want a panic", c.name, err)
		}
		_, err := c.tup.Pack()
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: our Pack: %v", c.name, err)
			}
			checkPackUnpack(t, c.name, c.tup)
			continue
		}
		var te *tuple.Error
		if !errors.Is(err, c.want) || !errors.As(err, &te) {
			t.Errorf("%s: our Pack: %v, want a *tuple.Error matching %v", c.name, err, c.want)
		}
	}
}

// TestCompareOrdersAsPackedBytes: our Compare orders tuples exactly as
// bytes.Compare orders the binding's packings of them (the binding has no
// Compare of its own): on every pair of a few hundred corpus tuples, on
// pairs that share a prefix and differ in one element (often of the same
// kind), and along the whole corpus sorted by Compare.
func TestCompareOrdersAsPackedBytes(t *testing.T) {
	all := corpus()
	packed := make([][]byte, len(all))
	for i, tup := range all {
		p, err := fdbPack(toFDB(tup))
		if err != nil {
			t.Fatalf("tuple %d %v: %v", i, tup, err)
		}
		packed[i] = p
	}
	check := func(a, b tuple.Tuple, pa, pb []byte) {
		t.Helper()
		want := bytes.Compare(pa, pb)
		if got := tuple.Compare(a, b); got != want {
			t.Errorf("Compare(%v, %v) = %d, bytes.Compare of the binding's packings = %d", a, b, got, want)
		}
		if got := tuple.Compare(b, a); got != -want {
			t.Errorf("Compare(%v, %v) = %d, want %d", b, a, got, -want)
		}
	}

	// Every pair among the first 500 (the edge table and some random).
	n := min(len(all), 500)
	for i := range n {
		for j := range n {
			check(all[i], all[j], packed[i], packed[j])
		}
	}

	// Pairs sharing a prefix.
	g := newGen(2)
	for i, a := range all {
		b := g.variant(a)
		pb, err := fdbPack(toFDB(b))
		if err != nil {
			t.Fatalf("variant %v: %v", b, err)
		}
		check(a, b, packed[i], pb)
	}

	// The corpus sorted by Compare is sorted by packed bytes.
	idx := make([]int, len(all))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(i, j int) int { return tuple.Compare(all[i], all[j]) })
	for k := 1; k < len(idx); k++ {
		i, j := idx[k-1], idx[k]
		check(all[i], all[j], packed[i], packed[j])
	}
}

// variant returns a copy of t changed in one place, at any depth: an
// element replaced (by one of the same kind, half the time), removed, or
// appended.
func (g *gen) variant(t tuple.Tuple) tuple.Tuple {
	t = slices.Clone(t)
	if len(t) == 0 || g.r.IntN(5) == 0 {
		return append(t, g.element(1))
	}
	i := g.r.IntN(len(t))
	if g.r.IntN(6) == 0 {
		return slices.Delete(t, i, i+1)
	}
	if nested, ok := t[i].(tuple.Tuple); ok && g.r.IntN(2) == 0 {
		t[i] = g.variant(nested)
		return t
	}
	kind := func(e any) string { k, _, _ := strings.Cut(canon(e, false), ":"); return k }
	for try := 0; ; try++ {
		e := g.element(1)
		if try > 20 || g.r.IntN(2) == 0 || kind(e) == kind(t[i]) {
			t[i] = e
			return t
		}
	}
}

// TestPackWithVersionstampAgrees: for tuples holding one incomplete
// versionstamp anywhere (nested too) after a raw prefix (none, empty, 0xff
// bytes, random, and 70,000 bytes so the offset needs more than 16 bits),
// our PackWithVersionstamp and the binding's (tuple's, and subspace's)
// return the same key. Its last 4 bytes are the little-endian offset of the
// 10 placeholder bytes (API version >= 520; see apiVersion), and what lies
// between the prefix and the offset unpacks, on both sides, to the tuple.
func TestPackWithVersionstampAgrees(t *testing.T) {
	g := newGen(3)
	long := bytes.Repeat([]byte{0x15, 0x00, 0xff}, 70000/3)
	for i := range 3000 {
		tup := g.insertStamp(g.tuple(0), tuple.IncompleteVersionstamp(uint16(g.r.UintN(1<<16))))
		prefix := g.prefix()
		if i%500 == 0 {
			prefix = long
		}
		name := fmt.Sprintf("prefix %x tuple %v", prefix, tup)

		ours, err := tup.PackWithVersionstamp(prefix)
		if err != nil {
			t.Fatalf("%s: our PackWithVersionstamp: %v", name, err)
		}
		theirs, err := toFDB(tup).PackWithVersionstamp(prefix)
		if err != nil {
			t.Fatalf("%s: the binding's PackWithVersionstamp: %v", name, err)
		}
		if !bytes.Equal(ours, theirs) {
			t.Fatalf("%s: keys differ:\n ours    %x\n binding %x", name, ours, theirs)
		}
		sub, err := subspace.FromBytes(prefix).PackWithVersionstamp(toFDB(tup))
		if err != nil || !bytes.Equal(sub, ours) {
			t.Fatalf("%s: the binding's subspace PackWithVersionstamp = %x, %v; want %x", name, sub, err, ours)
		}

		body, off := stampOffset(ours)
		if !bytes.HasPrefix(body, prefix) || off < uint32(len(prefix))+1 || int(off)+12 > len(body) ||
			body[off-1] != 0x33 || !bytes.Equal(body[off:off+10], bytes.Repeat([]byte{0xff}, 10)) {
			t.Fatalf("%s: key %x: offset %d does not point at the placeholder after a 0x33 code", name, ours, off)
		}
		ou, err := tuple.Unpack(body[len(prefix):])
		if err != nil || canon(ou, false) != canon(tup, false) {
			t.Fatalf("%s: our Unpack of the key's tuple = %v, %v", name, ou, err)
		}
		fu, err, _ := fdbUnpack(body[len(prefix):])
		if err != nil || canon(fu, false) != canon(tup, false) {
			t.Fatalf("%s: the binding's Unpack of the key's tuple = %v, %v", name, fu, err)
		}
		if has, err := tup.HasIncompleteVersionstamp(); !has || err != nil {
			t.Fatalf("%s: our HasIncompleteVersionstamp = %v, %v", name, has, err)
		}
	}
}

// insertStamp returns a copy of t with vs inserted at a random position,
// possibly inside one of its nested tuples.
func (g *gen) insertStamp(t tuple.Tuple, vs tuple.Versionstamp) tuple.Tuple {
	t = slices.Clone(t)
	var nested []int
	for i, e := range t {
		if _, ok := e.(tuple.Tuple); ok {
			nested = append(nested, i)
		}
	}
	if len(nested) > 0 && g.r.IntN(2) == 0 {
		i := nested[g.r.IntN(len(nested))]
		t[i] = g.insertStamp(t[i].(tuple.Tuple), vs)
		return t
	}
	return slices.Insert(t, g.r.IntN(len(t)+1), any(vs))
}

// TestVersionstampCountErrors: with no incomplete versionstamp, or two,
// both PackWithVersionstamps return an error (ours matching
// ErrVersionstamp), and both HasIncompleteVersionstamps give the same
// answer.
func TestVersionstampCountErrors(t *testing.T) {
	inc := tuple.IncompleteVersionstamp
	cases := []struct {
		name string
		tup  tuple.Tuple
		has  bool
	}{
		{"none", tuple.Tuple{"a", tuple.Versionstamp{UserVersion: 1}}, false},
		{"empty", tuple.Tuple{}, false},
		{"two", tuple.Tuple{inc(0), inc(1)}, true},
		{"two, one nested", tuple.Tuple{inc(0), tuple.Tuple{nil, inc(1)}}, true},
		{"two nested", tuple.Tuple{tuple.Tuple{inc(0)}, tuple.Tuple{tuple.Tuple{inc(0)}}}, true},
	}
	for _, c := range cases {
		if _, err := c.tup.PackWithVersionstamp([]byte("p")); !errors.Is(err, tuple.ErrVersionstamp) {
			t.Errorf("%s: our PackWithVersionstamp: %v, want ErrVersionstamp", c.name, err)
		}
		if k, err := toFDB(c.tup).PackWithVersionstamp([]byte("p")); err == nil {
			t.Errorf("%s: the binding's PackWithVersionstamp = %x, want an error", c.name, k)
		}
		oh, oerr := c.tup.HasIncompleteVersionstamp()
		fh, ferr := toFDB(c.tup).HasIncompleteVersionstamp()
		if oh != c.has || fh != c.has || (oerr == nil) != (ferr == nil) {
			t.Errorf("%s: HasIncompleteVersionstamp: ours %v, %v; binding %v, %v", c.name, oh, oerr, fh, ferr)
		}
		if oerr != nil && !errors.Is(oerr, tuple.ErrVersionstamp) {
			t.Errorf("%s: our HasIncompleteVersionstamp: %v, want ErrVersionstamp", c.name, oerr)
		}
	}
}
