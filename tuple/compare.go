package tuple

import (
	"bytes"
	"cmp"
	"math"
	"math/big"
	"strings"
)

// Compare orders tuples the way their packed forms sort, returning -1, 0 or
// +1: for tuples a and b that Pack accepts,
// Compare(a, b) == bytes.Compare(a.Pack(), b.Pack()).
//
// Elements compare first by kind, in type-code order: nil < []byte <
// string < Tuple < integers < float32 < float64 < false < true < UUID <
// Versionstamp. Within a kind: integers by value, whatever their Go types
// (int8(-1) == big.NewInt(-1)); floats by IEEE total order on their bits
// (-NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN), so two NaNs with the
// same bits are equal; byte strings and strings bytewise; nested tuples
// recursively; UUIDs bytewise; versionstamps by transaction version, then
// user version. A tuple that is a prefix of another sorts first.
//
// Compare never panics. Elements of unsupported types sort after every
// supported element and equal to each other, and tuples nested deeper than
// MaxDepth compare equal at that depth.
func Compare(a, b Tuple) int {
	return compareTuples(a, b, 0)
}

func compareTuples(a, b Tuple, depth int) int {
	if depth > MaxDepth {
		return 0
	}
	for i := range min(len(a), len(b)) {
		if c := compareElems(a[i], b[i], depth); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// Kinds in the order of their type codes.
const (
	kindNull = iota
	kindBytes
	kindString
	kindNested
	kindInt
	kindFloat32
	kindFloat64
	kindFalse
	kindTrue
	kindUUID
	kindVersionstamp
	kindUnsupported
)

func kindOf(e any) int {
	switch v := e.(type) {
	case nil:
		return kindNull
	case []byte:
		return kindBytes
	case string:
		return kindString
	case Tuple:
		return kindNested
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, big.Int:
		return kindInt
	case *big.Int:
		if v == nil {
			return kindUnsupported
		}
		return kindInt
	case float32:
		return kindFloat32
	case float64:
		return kindFloat64
	case bool:
		if v {
			return kindTrue
		}
		return kindFalse
	case UUID:
		return kindUUID
	case Versionstamp:
		return kindVersionstamp
	default:
		return kindUnsupported
	}
}

func compareElems(x, y any, depth int) int {
	kx, ky := kindOf(x), kindOf(y)
	if kx != ky {
		return cmp.Compare(kx, ky)
	}
	switch kx {
	case kindBytes:
		return bytes.Compare(x.([]byte), y.([]byte))
	case kindString:
		return strings.Compare(x.(string), y.(string))
	case kindNested:
		return compareTuples(x.(Tuple), y.(Tuple), depth+1)
	case kindInt:
		return compareInts(x, y)
	case kindFloat32:
		return cmp.Compare(encodeFloat32Bits(math.Float32bits(x.(float32))), encodeFloat32Bits(math.Float32bits(y.(float32))))
	case kindFloat64:
		return cmp.Compare(encodeFloat64Bits(math.Float64bits(x.(float64))), encodeFloat64Bits(math.Float64bits(y.(float64))))
	case kindUUID:
		u, v := x.(UUID), y.(UUID)
		return bytes.Compare(u[:], v[:])
	case kindVersionstamp:
		u, v := x.(Versionstamp), y.(Versionstamp)
		if c := bytes.Compare(u.TransactionVersion[:], v.TransactionVersion[:]); c != 0 {
			return c
		}
		return cmp.Compare(u.UserVersion, v.UserVersion)
	default: // null, false, true, unsupported: the kind says it all
		return 0
	}
}

func compareInts(x, y any) int {
	if a, ok := asInt64(x); ok {
		if b, ok := asInt64(y); ok {
			return cmp.Compare(a, b)
		}
	}
	return asBig(x).Cmp(asBig(y))
}

// asInt64 returns an integer element as int64 if it fits.
func asInt64(e any) (int64, bool) {
	switch v := e.(type) {
	case int:
		return int64(v), true
	case int8:
		return int64(v), true
	case int16:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	case uint:
		return int64(v), uint64(v) <= math.MaxInt64
	case uint8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint64:
		return int64(v), v <= math.MaxInt64
	case *big.Int:
		return v.Int64(), v.IsInt64()
	case big.Int:
		return v.Int64(), v.IsInt64()
	}
	return 0, false
}

// asBig returns an integer element as a *big.Int (never nil for kindInt).
func asBig(e any) *big.Int {
	switch v := e.(type) {
	case uint:
		return new(big.Int).SetUint64(uint64(v))
	case uint64:
		return new(big.Int).SetUint64(v)
	case *big.Int:
		return v
	case big.Int:
		return &v
	}
	i, _ := asInt64(e)
	return big.NewInt(i)
}
