package tuple_test

import (
	"math"
	"math/big"
	"math/rand/v2"

	"github.com/fdbqueue/fdbqueue/tuple"
)

// gen makes seeded random tuples. With canonical set, elements have the
// types Unpack returns, so Unpack(Pack(t)) must equal t exactly; otherwise
// integers also come as int, int8, uint16, big.Int and so on. With small
// set, values come from small pools so that ties, shared prefixes and deep
// comparisons are frequent.
type gen struct {
	r         *rand.Rand
	canonical bool
	small     bool
}

func newGen(seed uint64, canonical, small bool) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, 0x7475706c65)), canonical: canonical, small: small}
}

func (g *gen) tuple(depth int) tuple.Tuple {
	n := g.r.IntN(6)
	if g.small {
		n = g.r.IntN(4)
	}
	t := make(tuple.Tuple, n)
	for i := range t {
		t[i] = g.elem(depth)
	}
	return t
}

var (
	float32Specials = []uint32{0, 0x80000000, 0x3f800000, 0xbf800000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xffffffff, 0x00000001, 0x80000001}
	float64Specials = []uint64{0, 1 << 63, 0x3ff0000000000000, 0xbff0000000000000, 0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000, 0xfff8000000000000, 0x7ff0000000000001, math.MaxUint64, 1, 1<<63 | 1}
)

func (g *gen) elem(depth int) any {
	kinds := 12
	if depth >= 3 {
		kinds = 11 // no more nesting
	}
	switch g.r.IntN(kinds) {
	case 0:
		return nil
	case 1:
		return g.r.IntN(2) == 0
	case 2, 3:
		return g.integer()
	case 4:
		if g.small {
			return math.Float32frombits(float32Specials[g.r.IntN(4)])
		}
		if g.r.IntN(2) == 0 {
			return math.Float32frombits(float32Specials[g.r.IntN(len(float32Specials))])
		}
		return math.Float32frombits(g.r.Uint32())
	case 5:
		if g.small {
			return math.Float64frombits(float64Specials[g.r.IntN(4)])
		}
		if g.r.IntN(2) == 0 {
			return math.Float64frombits(float64Specials[g.r.IntN(len(float64Specials))])
		}
		return math.Float64frombits(g.r.Uint64())
	case 6:
		return g.bytes()
	case 7:
		return string(g.bytes()) // not always valid UTF-8, which must round-trip too
	case 8:
		var u tuple.UUID
		for i := range u {
			u[i] = g.byteVal()
		}
		return u
	case 9:
		var v tuple.Versionstamp
		for i := range v.TransactionVersion {
			v.TransactionVersion[i] = g.byteVal()
		}
		if !v.IsComplete() {
			v.TransactionVersion[0] = 0
		}
		v.UserVersion = uint16(g.byteVal())
		return v
	case 10:
		return g.integer()
	default:
		return g.tuple(depth + 1)
	}
}

func (g *gen) byteVal() byte {
	if g.small {
		return []byte{0x00, 0x01, 0xfe, 0xff}[g.r.IntN(4)]
	}
	switch g.r.IntN(5) {
	case 0:
		return 0x00
	case 1:
		return 0xff
	default:
		return byte(g.r.Uint32())
	}
}

func (g *gen) bytes() []byte {
	n := g.r.IntN(12)
	if g.small {
		n = g.r.IntN(3)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = g.byteVal()
	}
	return b
}

// integer returns a random integer, biased to width boundaries.
func (g *gen) integer() any {
	var v *big.Int
	if g.small {
		v = big.NewInt(int64(g.r.IntN(7) - 3))
	} else {
		switch g.r.IntN(6) {
		case 0:
			v = big.NewInt(int64(g.r.IntN(1024) - 512))
		case 1: // around a byte boundary of int64/uint64 widths
			bits := 8 * (1 + g.r.IntN(8))
			v = new(big.Int).Lsh(big.NewInt(1), uint(bits))
			v.Add(v, big.NewInt(int64(g.r.IntN(5)-2)))
			if g.r.IntN(2) == 0 {
				v.Neg(v)
			}
		case 2:
			v = big.NewInt(int64(g.r.Uint64()))
		case 3:
			v = new(big.Int).SetUint64(g.r.Uint64())
		case 4: // just beyond 64 bits
			v = new(big.Int).SetUint64(g.r.Uint64())
			v.Lsh(v, uint(g.r.IntN(16)))
			if g.r.IntN(2) == 0 {
				v.Neg(v)
			}
		default: // up to 255 bytes
			b := make([]byte, 1+g.r.IntN(255))
			for i := range b {
				b[i] = byte(g.r.Uint32())
			}
			v = new(big.Int).SetBytes(b)
			if g.r.IntN(2) == 0 {
				v.Neg(v)
			}
		}
	}
	if g.canonical {
		return canonicalInt(v)
	}
	return g.anyIntType(v)
}

func canonicalInt(v *big.Int) any {
	switch {
	case v.IsInt64():
		return v.Int64()
	case v.IsUint64():
		return v.Uint64()
	default:
		return v
	}
}

// anyIntType returns v as a randomly chosen Go type that can hold it.
func (g *gen) anyIntType(v *big.Int) any {
	var options []any
	if v.IsInt64() {
		i := v.Int64()
		options = append(options, i, *big.NewInt(i))
		if i == int64(int(i)) {
			options = append(options, int(i))
		}
		if i == int64(int8(i)) {
			options = append(options, int8(i))
		}
		if i == int64(int16(i)) {
			options = append(options, int16(i))
		}
		if i == int64(int32(i)) {
			options = append(options, int32(i))
		}
	}
	if v.IsUint64() {
		u := v.Uint64()
		options = append(options, u, uint(u))
		if u == uint64(uint8(u)) {
			options = append(options, uint8(u))
		}
		if u == uint64(uint16(u)) {
			options = append(options, uint16(u))
		}
		if u == uint64(uint32(u)) {
			options = append(options, uint32(u))
		}
	}
	options = append(options, new(big.Int).Set(v))
	return options[g.r.IntN(len(options))]
}

// mutate returns a tuple close to t: one element changed, dropped or
// added, recursively, so that the pair shares a prefix.
func (g *gen) mutate(t tuple.Tuple, depth int) tuple.Tuple {
	out := append(tuple.Tuple{}, t...)
	switch {
	case len(out) == 0 || g.r.IntN(5) == 0:
		return append(out, g.elem(depth))
	case g.r.IntN(4) == 0:
		return out[:g.r.IntN(len(out))]
	}
	i := g.r.IntN(len(out))
	if nested, ok := out[i].(tuple.Tuple); ok && depth < 3 {
		out[i] = g.mutate(nested, depth+1)
	} else {
		out[i] = g.elem(depth)
	}
	return out
}
