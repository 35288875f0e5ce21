package tuple

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"reflect"
	"slices"
)

// Type codes of the tuple encoding.
const (
	codeNull         = 0x00
	codeBytes        = 0x01
	codeString       = 0x02
	codeNested       = 0x05
	codeNegBig       = 0x0b
	codeIntZero      = 0x14
	codePosBig       = 0x1d
	codeFloat32      = 0x20
	codeFloat64      = 0x21
	codeTrueOld      = 0x25 // deprecated true: decoded, never encoded
	codeFalse        = 0x26
	codeTrue         = 0x27
	codeUUID         = 0x30
	codeVersionstamp = 0x33

	escape = 0xff // follows a 0x00 that is data, not a terminator
)

// maxBigIntBytes is the widest magnitude the arbitrary-precision integer
// codes can carry: their length field is one byte.
const maxBigIntBytes = 255

// Pack encodes t. It returns an error matching ErrUnsupportedType if an
// element cannot be encoded, and one matching ErrVersionstamp if t holds an
// incomplete versionstamp (use PackWithVersionstamp for those). It never
// panics. The result is freshly allocated with exactly the needed capacity.
func (t Tuple) Pack() ([]byte, error) {
	n, stamps, err := measureTuple(t, false, 0)
	if err != nil {
		return nil, err
	}
	if stamps != 0 {
		return nil, stampCountError("pack", stamps, "Pack")
	}
	out, _ := appendTuple(make([]byte, 0, n), t, false, -1)
	return out, nil
}

// AppendPack appends the encoding of t to dst and returns the extended
// slice, growing it at most once. Packing into a reused buffer (for
// instance append(buf[:0], prefix...)) does not allocate. To build a fresh
// key from a shared subspace prefix in one allocation, without writing into
// the prefix's spare capacity, pass prefix[:len(prefix):len(prefix)].
// Errors are those of Pack; on error dst is returned unchanged.
func (t Tuple) AppendPack(dst []byte) ([]byte, error) {
	n, stamps, err := measureTuple(t, false, 0)
	if err != nil {
		return dst, err
	}
	if stamps != 0 {
		return dst, stampCountError("pack", stamps, "AppendPack")
	}
	dst = slices.Grow(dst, n)
	dst, _ = appendTuple(dst, t, false, -1)
	return dst, nil
}

// PackWithVersionstamp returns prefix, then the encoding of t, then the
// 4-byte little-endian offset, within the returned key, of the first byte of
// the incomplete versionstamp's ten placeholder bytes. That is the key
// format the SetVersionstampedKey mutation expects (API version 520 and
// later): at commit the database writes the transaction version over the
// placeholder and strips the offset. t must hold exactly one incomplete
// versionstamp, possibly inside a nested tuple; otherwise the error matches
// ErrVersionstamp. prefix is not modified.
func (t Tuple) PackWithVersionstamp(prefix []byte) ([]byte, error) {
	n, stamps, err := measureTuple(t, false, 0)
	if err != nil {
		return nil, err
	}
	if stamps != 1 {
		return nil, stampCountError("pack", stamps, "PackWithVersionstamp")
	}
	if uint64(len(prefix))+uint64(n) > math.MaxUint32 {
		return nil, &Error{Op: "pack", Offset: -1, Detail: "key too long for a 32-bit versionstamp offset", Err: ErrVersionstamp}
	}
	out := make([]byte, 0, len(prefix)+n+4)
	out = append(out, prefix...)
	out, pos := appendTuple(out, t, false, -1)
	return binary.LittleEndian.AppendUint32(out, uint32(pos)), nil
}

// HasIncompleteVersionstamp reports whether t holds at least one incomplete
// versionstamp, at any depth. The error is non-nil if t holds more than one
// (matching ErrVersionstamp, with true) or cannot be packed at all (the
// error Pack would return, with false).
func (t Tuple) HasIncompleteVersionstamp() (bool, error) {
	_, stamps, err := measureTuple(t, false, 0)
	if err != nil {
		return false, err
	}
	if stamps > 1 {
		return true, stampCountError("pack", stamps, "PackWithVersionstamp")
	}
	return stamps == 1, nil
}

func stampCountError(op string, n int, fn string) error {
	var detail string
	switch {
	case n == 0:
		detail = fn + " needs exactly one incomplete versionstamp, the tuple has none"
	case fn == "PackWithVersionstamp":
		detail = fmt.Sprintf("a tuple may hold at most one incomplete versionstamp, it has %d", n)
	default:
		detail = fmt.Sprintf("the tuple holds %d incomplete versionstamp(s); pack it with PackWithVersionstamp", n)
	}
	return &Error{Op: op, Offset: -1, Detail: detail, Err: ErrVersionstamp}
}

// measureTuple validates t and returns the length of its encoding and the
// number of incomplete versionstamps in it. Every error Pack can return
// comes from here, so the encoding pass that follows cannot fail.
func measureTuple(t Tuple, nested bool, depth int) (n, stamps int, err error) {
	if depth > MaxDepth {
		return 0, 0, &Error{Op: "pack", Offset: -1, Detail: fmt.Sprintf("tuples nested deeper than MaxDepth (%d); is the tuple cyclic?", MaxDepth), Err: ErrUnsupportedType}
	}
	for i, e := range t {
		m, s, err := measureElem(e, nested, depth)
		if err != nil {
			return 0, 0, prependPath(err, i)
		}
		n += m
		stamps += s
	}
	return n, stamps, nil
}

func measureElem(e any, nested bool, depth int) (n, stamps int, err error) {
	switch v := e.(type) {
	case nil:
		if nested {
			return 2, 0, nil
		}
		return 1, 0, nil
	case []byte:
		return 2 + len(v) + countZeros(v), 0, nil
	case string:
		return 2 + len(v) + countZeros(v), 0, nil
	case Tuple:
		m, s, err := measureTuple(v, true, depth+1)
		return 2 + m, s, err
	case int:
		return 1 + intLen(int64(v)), 0, nil
	case int8:
		return 1 + intLen(int64(v)), 0, nil
	case int16:
		return 1 + intLen(int64(v)), 0, nil
	case int32:
		return 1 + intLen(int64(v)), 0, nil
	case int64:
		return 1 + intLen(v), 0, nil
	case uint:
		return 1 + uintLen(uint64(v)), 0, nil
	case uint8:
		return 1 + uintLen(uint64(v)), 0, nil
	case uint16:
		return 1 + uintLen(uint64(v)), 0, nil
	case uint32:
		return 1 + uintLen(uint64(v)), 0, nil
	case uint64:
		return 1 + uintLen(v), 0, nil
	case *big.Int:
		if v == nil {
			return 0, 0, &Error{Op: "pack", Offset: -1, Type: "*big.Int", Detail: "nil *big.Int", Err: ErrUnsupportedType}
		}
		return bigLen(v)
	case big.Int:
		return bigLen(&v)
	case float32:
		return 5, 0, nil
	case float64:
		return 9, 0, nil
	case bool:
		return 1, 0, nil
	case UUID:
		return 17, 0, nil
	case Versionstamp:
		if !v.IsComplete() {
			return 13, 1, nil
		}
		return 13, 0, nil
	default:
		return 0, 0, &Error{Op: "pack", Offset: -1, Type: reflect.TypeOf(e).String(), Detail: "element type not supported", Err: ErrUnsupportedType}
	}
}

func countZeros[S string | []byte](s S) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			n++
		}
	}
	return n
}

// uintLen is the minimal number of big-endian bytes holding u (0 for 0).
func uintLen(u uint64) int { return (bits.Len64(u) + 7) / 8 }

// magnitude returns |v| as a uint64; it is exact for math.MinInt64 too.
func magnitude(v int64) uint64 {
	if v < 0 {
		return uint64(-v) // two's complement wrap makes MinInt64 come out as 1<<63
	}
	return uint64(v)
}

func intLen(v int64) int { return uintLen(magnitude(v)) }

func bigLen(v *big.Int) (n, stamps int, err error) {
	if v.IsInt64() {
		return 1 + intLen(v.Int64()), 0, nil
	}
	if v.IsUint64() {
		return 1 + uintLen(v.Uint64()), 0, nil
	}
	m := (v.BitLen() + 7) / 8
	switch {
	case m <= 8: // a negative number below MinInt64 still fits code 0x0c
		return 1 + m, 0, nil
	case m <= maxBigIntBytes:
		return 2 + m, 0, nil
	default:
		return 0, 0, &Error{Op: "pack", Offset: -1, Type: "*big.Int", Detail: fmt.Sprintf("integer needs %d bytes, the encoding allows at most %d", m, maxBigIntBytes), Err: ErrUnsupportedType}
	}
}

// appendTuple encodes a validated tuple. vsPos is the offset in dst of an
// incomplete versionstamp's placeholder found so far (-1 if none); the
// updated value is returned.
func appendTuple(dst []byte, t Tuple, nested bool, vsPos int) ([]byte, int) {
	for _, e := range t {
		dst, vsPos = appendElem(dst, e, nested, vsPos)
	}
	return dst, vsPos
}

func appendElem(dst []byte, e any, nested bool, vsPos int) ([]byte, int) {
	switch v := e.(type) {
	case nil:
		if nested {
			return append(dst, codeNull, escape), vsPos
		}
		return append(dst, codeNull), vsPos
	case []byte:
		return appendEscaped(append(dst, codeBytes), v), vsPos
	case string:
		return appendEscaped(append(dst, codeString), v), vsPos
	case Tuple:
		dst, vsPos = appendTuple(append(dst, codeNested), v, true, vsPos)
		return append(dst, 0x00), vsPos
	case int:
		return appendInt(dst, int64(v)), vsPos
	case int8:
		return appendInt(dst, int64(v)), vsPos
	case int16:
		return appendInt(dst, int64(v)), vsPos
	case int32:
		return appendInt(dst, int64(v)), vsPos
	case int64:
		return appendInt(dst, v), vsPos
	case uint:
		return appendUint(dst, uint64(v)), vsPos
	case uint8:
		return appendUint(dst, uint64(v)), vsPos
	case uint16:
		return appendUint(dst, uint64(v)), vsPos
	case uint32:
		return appendUint(dst, uint64(v)), vsPos
	case uint64:
		return appendUint(dst, v), vsPos
	case *big.Int:
		return appendBig(dst, v), vsPos
	case big.Int:
		return appendBig(dst, &v), vsPos
	case float32:
		return binary.BigEndian.AppendUint32(append(dst, codeFloat32), encodeFloat32Bits(math.Float32bits(v))), vsPos
	case float64:
		return binary.BigEndian.AppendUint64(append(dst, codeFloat64), encodeFloat64Bits(math.Float64bits(v))), vsPos
	case bool:
		if v {
			return append(dst, codeTrue), vsPos
		}
		return append(dst, codeFalse), vsPos
	case UUID:
		return append(append(dst, codeUUID), v[:]...), vsPos
	case Versionstamp:
		dst = append(dst, codeVersionstamp)
		if !v.IsComplete() {
			vsPos = len(dst)
		}
		dst = append(dst, v.TransactionVersion[:]...)
		return binary.BigEndian.AppendUint16(dst, v.UserVersion), vsPos
	default:
		// Unreachable: measureElem rejected every other type.
		return dst, vsPos
	}
}

// appendEscaped appends s with each 0x00 written as 0x00 0xff, then the
// terminating 0x00.
func appendEscaped[S string | []byte](dst []byte, s S) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			dst = append(dst, s[start:i+1]...)
			dst = append(dst, escape)
			start = i + 1
		}
	}
	dst = append(dst, s[start:]...)
	return append(dst, 0x00)
}

func appendUint(dst []byte, u uint64) []byte {
	n := uintLen(u)
	dst = append(dst, byte(codeIntZero+n))
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(u>>(8*i)))
	}
	return dst
}

func appendInt(dst []byte, v int64) []byte {
	if v >= 0 {
		return appendUint(dst, uint64(v))
	}
	m := magnitude(v)
	n := uintLen(m)
	dst = append(dst, byte(codeIntZero-n))
	c := ^m // one's complement of the magnitude; the low n bytes are written
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(c>>(8*i)))
	}
	return dst
}

func appendBig(dst []byte, v *big.Int) []byte {
	if v.IsInt64() {
		return appendInt(dst, v.Int64())
	}
	if v.IsUint64() {
		return appendUint(dst, v.Uint64())
	}
	neg := v.Sign() < 0
	n := (v.BitLen() + 7) / 8
	switch {
	case n <= 8: // only negatives in [-(2^64-1), MinInt64) get here
		dst = append(dst, byte(codeIntZero-n))
	case neg:
		dst = append(dst, codeNegBig, ^byte(n))
	default:
		dst = append(dst, codePosBig, byte(n))
	}
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	v.FillBytes(dst[start:]) // big-endian magnitude
	if neg {
		for i := start; i < len(dst); i++ {
			dst[i] = ^dst[i]
		}
	}
	return dst
}

// encodeFloat32Bits maps IEEE bits to bytes that sort in total order:
// negative numbers have every bit inverted, others only the sign bit.
func encodeFloat32Bits(b uint32) uint32 {
	if b&(1<<31) != 0 {
		return ^b
	}
	return b ^ (1 << 31)
}

func decodeFloat32Bits(b uint32) uint32 {
	if b&(1<<31) == 0 {
		return ^b
	}
	return b ^ (1 << 31)
}

func encodeFloat64Bits(b uint64) uint64 {
	if b&(1<<63) != 0 {
		return ^b
	}
	return b ^ (1 << 63)
}

func decodeFloat64Bits(b uint64) uint64 {
	if b&(1<<63) == 0 {
		return ^b
	}
	return b ^ (1 << 63)
}
