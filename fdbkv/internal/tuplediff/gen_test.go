package tuplediff_test

import (
	"math"
	"math/big"
	"math/rand/v2"

	"github.com/fdbqueue/fdbqueue/tuple"
)

// seed fixes every random choice: a failure reproduces exactly.
const seed = 0x7475706c65646966 // "tuplediff"

func newGen(stream uint64) *gen { return &gen{r: rand.New(rand.NewPCG(seed, stream))} }

// gen makes random tuples of every element type both codecs support. It
// never makes an incomplete versionstamp (PackWithVersionstamp's tests put
// one in themselves).
type gen struct{ r *rand.Rand }

// byteString has runs of 0x00 and 0xff (the bytes the escaping and the
// terminator are about) among random bytes, so also invalid UTF-8.
func (g *gen) byteString() []byte {
	b := make([]byte, g.r.IntN(10))
	for i := range b {
		switch g.r.IntN(4) {
		case 0:
			b[i] = 0x00
		case 1:
			b[i] = 0xff
		default:
			b[i] = byte(g.r.UintN(256))
		}
	}
	return b
}

var bigOne = big.NewInt(1)

// pow256 returns 256^k.
func pow256(k int) *big.Int { return new(big.Int).Lsh(bigOne, uint(8*k)) }

// integer returns a random integer: near a size boundary ±256^k (k = 0..9,
// so 0, ±1, ±255, ±256, ... ±2^64 and one byte past), a random width up to
// 8 bytes, or a big one of 9..255 bytes; in a random Go type that holds it.
func (g *gen) integer() any {
	var v *big.Int
	switch g.r.IntN(4) {
	case 0:
		v = pow256(g.r.IntN(10))
		v.Add(v, big.NewInt(int64(g.r.IntN(3)-1)))
	case 1:
		v = g.bigMagnitude(9 + g.r.IntN(247))
	default:
		v = new(big.Int).SetUint64(g.r.Uint64() >> g.r.UintN(64))
	}
	if g.r.IntN(2) == 0 {
		v.Neg(v)
	}
	return g.typed(v)
}

// bigMagnitude returns a positive integer of exactly n bytes: random,
// 256^(n-1) or 256^n-1 (all 0xff, whose negative packs as all 0x00).
func (g *gen) bigMagnitude(n int) *big.Int {
	switch g.r.IntN(3) {
	case 0:
		return pow256(n - 1)
	case 1:
		return new(big.Int).Sub(pow256(n), bigOne)
	default:
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(g.r.UintN(256))
		}
		b[0] |= 1
		return new(big.Int).SetBytes(b)
	}
}

// typed returns v in a random Go type able to hold it.
func (g *gen) typed(v *big.Int) any {
	c := allTypes(v)
	return c[g.r.IntN(len(c))]
}

// Float bit patterns worth packing: zeros, infinities, quiet and signalling
// NaNs of both signs with payloads, the smallest and largest subnormals and
// normals.
var (
	float32Bits = []uint32{
		0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
		0x7f800001, 0xff800001, 0x7fffffff, 0xffffffff, 0x7fa5a5a5,
		0x00000001, 0x80000001, 0x007fffff, 0x807fffff, 0x00800000, 0x80800000,
		0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000,
	}
	float64Bits = []uint64{
		0x0000000000000000, 0x8000000000000000, 0x7ff0000000000000, 0xfff0000000000000,
		0x7ff8000000000000, 0xfff8000000000000, 0x7ff0000000000001, 0xfff0000000000001,
		0x7fffffffffffffff, 0xffffffffffffffff, 0x7ff5a5a5a5a5a5a5,
		0x0000000000000001, 0x8000000000000001, 0x000fffffffffffff, 0x800fffffffffffff,
		0x0010000000000000, 0x8010000000000000, 0x7fefffffffffffff, 0xffefffffffffffff,
		0x3ff0000000000000, 0xbff0000000000000,
	}
)

func (g *gen) float32() float32 {
	if g.r.IntN(2) == 0 {
		return math.Float32frombits(float32Bits[g.r.IntN(len(float32Bits))])
	}
	return math.Float32frombits(g.r.Uint32())
}

func (g *gen) float64() float64 {
	if g.r.IntN(2) == 0 {
		return math.Float64frombits(float64Bits[g.r.IntN(len(float64Bits))])
	}
	return math.Float64frombits(g.r.Uint64())
}

func (g *gen) uuid() tuple.UUID {
	var u tuple.UUID
	switch g.r.IntN(4) {
	case 0:
	case 1:
		for i := range u {
			u[i] = 0xff
		}
	default:
		for i := range u {
			u[i] = byte(g.r.UintN(256))
		}
	}
	return u
}

// completeStamp returns a complete versionstamp: zero, one byte short of
// the incomplete placeholder, or random.
func (g *gen) completeStamp() tuple.Versionstamp {
	var v tuple.Versionstamp
	switch g.r.IntN(4) {
	case 0:
	case 1:
		for i := range v.TransactionVersion {
			v.TransactionVersion[i] = 0xff
		}
		v.TransactionVersion[g.r.IntN(10)] = 0xfe
	default:
		for i := range v.TransactionVersion {
			v.TransactionVersion[i] = byte(g.r.UintN(256))
		}
		v.TransactionVersion[0] &= 0x7f // never the placeholder
	}
	v.UserVersion = uint16(g.r.UintN(1 << 16))
	if g.r.IntN(4) == 0 {
		v.UserVersion = math.MaxUint16
	}
	return v
}

// element returns a random element; depth bounds the nesting.
func (g *gen) element(depth int) any {
	for {
		switch g.r.IntN(12) {
		case 0:
			return nil
		case 1:
			return g.byteString()
		case 2:
			return string(g.byteString())
		case 3, 4:
			return g.integer()
		case 5:
			return g.float32()
		case 6:
			return g.float64()
		case 7:
			return g.r.IntN(2) == 0
		case 8:
			return g.uuid()
		case 9:
			return g.completeStamp()
		default:
			if depth < 3 {
				return g.tuple(depth + 1)
			}
		}
	}
}

// tuple returns a random tuple of 0..5 elements; nested ones (depth > 0)
// hold nil more often, since nil inside a nested tuple has its own encoding.
func (g *gen) tuple(depth int) tuple.Tuple {
	t := tuple.Tuple{}
	for range g.r.IntN(6) {
		if depth > 0 && g.r.IntN(4) == 0 {
			t = append(t, nil)
			continue
		}
		t = append(t, g.element(depth))
	}
	return t
}

// prefix returns a raw key prefix for subspaces and versionstamped keys:
// nil, empty, all 0xff, or random bytes.
func (g *gen) prefix() []byte {
	switch g.r.IntN(5) {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2:
		b := make([]byte, 1+g.r.IntN(3))
		for i := range b {
			b[i] = 0xff
		}
		return b
	default:
		return g.byteString()
	}
}

// edgeTuples is the explicit table: every boundary named in the task, the
// test cases of FoundationDB's design/tuple.md, and nil inside nested
// tuples. Integers at each size boundary appear in every Go type that holds
// them.
func edgeTuples() []tuple.Tuple {
	var out []tuple.Tuple
	add := func(e ...any) { out = append(out, tuple.Tuple(e)) }

	// Structure and nil.
	add()
	add(nil)
	add(nil, nil)
	add(tuple.Tuple{})
	add(tuple.Tuple{nil})
	add(tuple.Tuple{nil, nil})
	add(tuple.Tuple{tuple.Tuple{}})
	add(tuple.Tuple{tuple.Tuple{nil}, nil})
	add(tuple.Tuple{nil, tuple.Tuple{nil, tuple.Tuple{nil}}}, nil)
	add(tuple.Tuple{[]byte{0}, "\x00", tuple.Tuple{[]byte{0xff, 0x00}}})

	// Strings (design/tuple.md's test cases among them).
	for _, s := range []string{"", "\x00", "\xff", "\x00\xff", "\xff\x00", "\x00\x00", "foo\x00bar", "F\u00d4O\u0000bar", "\xfe\xff"} {
		add(s)
		add([]byte(s))
	}
	add(tuple.Tuple{"foo\x00bar", nil, tuple.Tuple{}}) // design/tuple.md: b'\x05\x01foo\x00\xffbar\x00\x00\xff\x05\x00\x00' (with bytes)
	add(tuple.Tuple{[]byte("foo\x00bar"), nil, tuple.Tuple{}})
	add(int64(-5551212)) // design/tuple.md: b'\x11\xabK\x93'
	add(float32(-42))    // design/tuple.md: b'\x20\x3d\xd7\xff\xff'

	// Integers: 0, ±1, ±255, ±256, every ±256^k±1 up to 2^64, and
	// MinInt64/MaxInt64/MaxUint64 in every type that holds them.
	g := newGen(0)
	vals := []*big.Int{big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64), new(big.Int).SetUint64(math.MaxUint64),
		new(big.Int).SetUint64(1 << 63), new(big.Int).Neg(new(big.Int).SetUint64(1<<63 + 1))}
	for k := 0; k <= 9; k++ {
		for d := int64(-1); d <= 1; d++ {
			v := new(big.Int).Add(pow256(k), big.NewInt(d))
			vals = append(vals, v, new(big.Int).Neg(v))
		}
	}
	for _, v := range vals {
		for _, e := range allTypes(v) {
			add(e)
		}
	}
	// Big integers: 9 to 255 bytes, both signs, all-0xff and 256^(n-1)
	// magnitudes (whose one's complements have leading zero bytes).
	for _, n := range []int{9, 10, 16, 17, 100, 254, 255} {
		for _, m := range []*big.Int{pow256(n - 1), new(big.Int).Sub(pow256(n), bigOne), new(big.Int).Add(pow256(n-1), bigOne)} {
			add(new(big.Int).Set(m))
			add(new(big.Int).Neg(m))
			add(*new(big.Int).Neg(m))
		}
	}

	// Floats, bools, UUIDs, complete versionstamps.
	for _, b := range float32Bits {
		add(math.Float32frombits(b))
	}
	for _, b := range float64Bits {
		add(math.Float64frombits(b))
	}
	add(false)
	add(true)
	add(false, true)
	add(tuple.UUID{})
	add(tuple.UUID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	add(tuple.Versionstamp{})
	add(tuple.Versionstamp{TransactionVersion: [10]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}, UserVersion: math.MaxUint16})
	add(tuple.Versionstamp{TransactionVersion: [10]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 10}, UserVersion: 7})
	for range 20 {
		add(g.completeStamp(), g.uuid())
	}

	// One of every kind in one tuple, and nested.
	all := tuple.Tuple{nil, []byte("a\x00"), "b\xff", tuple.Tuple{nil}, int64(-1), uint64(math.MaxUint64), big.NewInt(0), float32(1.5), 2.5, true, false, tuple.UUID{1}, tuple.Versionstamp{UserVersion: 1}}
	add(all...)
	add(all, all)
	return out
}

// allTypes returns v in every Go type that holds it.
func allTypes(v *big.Int) []any {
	out := []any{new(big.Int).Set(v), *new(big.Int).Set(v)}
	if v.IsInt64() {
		i := v.Int64()
		out = append(out, i, int(i))
		if i == int64(int8(i)) {
			out = append(out, int8(i))
		}
		if i == int64(int16(i)) {
			out = append(out, int16(i))
		}
		if i == int64(int32(i)) {
			out = append(out, int32(i))
		}
	}
	if v.IsUint64() {
		u := v.Uint64()
		out = append(out, u, uint(u))
		if u <= math.MaxUint8 {
			out = append(out, uint8(u))
		}
		if u <= math.MaxUint16 {
			out = append(out, uint16(u))
		}
		if u <= math.MaxUint32 {
			out = append(out, uint32(u))
		}
	}
	return out
}
