package tuple

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strings"
)

// Unpack decodes a packed tuple. Elements come back normalised: integers as
// int64 when they fit, uint64 when positive and above math.MaxInt64, and
// *big.Int otherwise; floats as float32 (code 0x20) or float64 (0x21), with
// their exact bits, NaN payloads included; byte strings as non-nil []byte
// (fresh copies, never aliasing b); unicode strings as string (the UTF-8 is
// not validated, so any bytes round-trip); nested tuples as Tuple; null as
// nil; booleans as bool; UUID and Versionstamp as themselves (an incomplete
// versionstamp is returned as such; Pack rejects it, PackWithVersionstamp
// re-creates its key).
//
// Unpack accepts only canonical encodings, the ones Pack produces, with two
// exceptions: the deprecated true code 0x25 is decoded as true (it re-packs
// as 0x27), and 2^64-1 and -(2^64-1) are also read in the form FDB's Python
// binding writes them, 0x1d 0x08 and 0x0b 0xf7 followed by 8 bytes (they
// re-pack with codes 0x1c and 0x0c). Everything else non-canonical is
// rejected: integers that are not in their minimal width (a leading zero
// magnitude byte, or any other 0x0b/0x1d integer that would fit in 8
// bytes), unknown type codes (including the
// FDB types this package does not support: 80-bit versionstamps 0x32,
// extended floats, user types 0x40-0x4f), truncated elements, unterminated
// strings or nested tuples, and nesting deeper than MaxDepth. All such
// errors match ErrMalformed and are *Error values giving the offset. Unpack
// never panics and does not modify b.
func Unpack(b []byte) (Tuple, error) {
	d := decoder{b: b}
	return d.tuple(false, 0)
}

type decoder struct {
	b     []byte
	off   int // next byte to read
	start int // offset of the type code of the element being decoded
}

func (d *decoder) fail(at int, code int, format string, args ...any) error {
	e := &Error{Op: "unpack", Offset: at, Detail: fmt.Sprintf(format, args...), Err: ErrMalformed}
	if code >= 0 {
		e.Type = fmt.Sprintf("code 0x%02x", code)
	}
	return e
}

// tuple decodes elements until the end of input (top level) or the
// terminating 0x00 (nested).
func (d *decoder) tuple(nested bool, depth int) (Tuple, error) {
	start := d.off - 1 // the nested-tuple code, for error reports
	t := Tuple{}
	if rest := len(d.b) - d.off; rest > 0 {
		t = make(Tuple, 0, min(rest, 4))
	}
	for {
		if d.off >= len(d.b) {
			if nested {
				return nil, d.fail(start, codeNested, "nested tuple has no terminating 0x00")
			}
			return t, nil
		}
		if nested && d.b[d.off] == 0x00 {
			if d.off+1 < len(d.b) && d.b[d.off+1] == escape {
				t = append(t, nil)
				d.off += 2
				continue
			}
			d.off++
			return t, nil
		}
		e, err := d.elem(depth)
		if err != nil {
			return nil, prependPath(err, len(t))
		}
		t = append(t, e)
	}
}

// need consumes and returns the next n bytes of the current element, or
// reports that the input ends too soon.
func (d *decoder) need(n int, code byte, what string) ([]byte, error) {
	if len(d.b)-d.off < n {
		return nil, d.fail(d.start, int(code), "%s needs %d bytes, %d left", what, n, len(d.b)-d.off)
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p, nil
}

func (d *decoder) elem(depth int) (any, error) {
	at := d.off
	d.start = at
	code := d.b[at]
	d.off++
	switch {
	case code == codeNull:
		return nil, nil
	case code == codeBytes:
		return d.bytes(code)
	case code == codeString:
		return d.string(code)
	case code == codeNested:
		if depth+1 > MaxDepth {
			return nil, d.fail(at, int(code), "tuples nested deeper than MaxDepth (%d)", MaxDepth)
		}
		return d.tuple(true, depth+1)
	case code == codeIntZero:
		return int64(0), nil
	case code > codeNegBig && code < codeIntZero:
		return d.negInt(code)
	case code > codeIntZero && code < codePosBig:
		return d.posInt(code)
	case code == codeNegBig || code == codePosBig:
		return d.bigInt(code)
	case code == codeFloat32:
		p, err := d.need(4, code, "float32")
		if err != nil {
			return nil, err
		}
		return math.Float32frombits(decodeFloat32Bits(binary.BigEndian.Uint32(p))), nil
	case code == codeFloat64:
		p, err := d.need(8, code, "float64")
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(decodeFloat64Bits(binary.BigEndian.Uint64(p))), nil
	case code == codeFalse:
		return false, nil
	case code == codeTrue || code == codeTrueOld:
		return true, nil
	case code == codeUUID:
		p, err := d.need(16, code, "UUID")
		if err != nil {
			return nil, err
		}
		return UUID(p), nil
	case code == codeVersionstamp:
		p, err := d.need(12, code, "versionstamp")
		if err != nil {
			return nil, err
		}
		return Versionstamp{TransactionVersion: [10]byte(p[:10]), UserVersion: binary.BigEndian.Uint16(p[10:])}, nil
	default:
		return nil, d.fail(at, int(code), "unknown or unsupported type code")
	}
}

// escapedLen scans the escaped payload starting at d.off and returns its
// decoded length, the index of its terminator and whether it has escapes.
func (d *decoder) escapedLen(code byte) (n, end int, escaped bool, err error) {
	b := d.b
	for i := d.off; i < len(b); i++ {
		if b[i] != 0x00 {
			n++
			continue
		}
		if i+1 < len(b) && b[i+1] == escape {
			n++
			i++
			escaped = true
			continue
		}
		return n, i, escaped, nil
	}
	return 0, 0, false, d.fail(d.start, int(code), "string has no terminating 0x00")
}

// unescape writes the payload between d.off and end into dst, dropping the
// 0xff after each data 0x00.
func unescape(dst []byte, src []byte) []byte {
	for i := 0; i < len(src); i++ {
		dst = append(dst, src[i])
		if src[i] == 0x00 {
			i++ // skip the escape byte
		}
	}
	return dst
}

func (d *decoder) bytes(code byte) ([]byte, error) {
	n, end, escaped, err := d.escapedLen(code)
	if err != nil {
		return nil, err
	}
	src := d.b[d.off:end]
	d.off = end + 1
	out := make([]byte, 0, n)
	if !escaped {
		return append(out, src...), nil
	}
	return unescape(out, src), nil
}

func (d *decoder) string(code byte) (string, error) {
	n, end, escaped, err := d.escapedLen(code)
	if err != nil {
		return "", err
	}
	src := d.b[d.off:end]
	d.off = end + 1
	if !escaped {
		return string(src), nil
	}
	var sb strings.Builder
	sb.Grow(n)
	for i := 0; i < len(src); i++ {
		sb.WriteByte(src[i])
		if src[i] == 0x00 {
			i++
		}
	}
	return sb.String(), nil
}

// posInt decodes codes 0x15..0x1c: 1..8 big-endian bytes.
func (d *decoder) posInt(code byte) (any, error) {
	n := int(code) - codeIntZero
	p, err := d.need(n, code, "integer")
	if err != nil {
		return nil, err
	}
	if p[0] == 0x00 {
		return nil, d.fail(d.start, int(code), "integer is not minimally encoded (leading zero byte)")
	}
	var u uint64
	for _, c := range p {
		u = u<<8 | uint64(c)
	}
	if u <= math.MaxInt64 {
		return int64(u), nil
	}
	return u, nil
}

// negInt decodes codes 0x0c..0x13: the one's complement of a 1..8 byte
// magnitude.
func (d *decoder) negInt(code byte) (any, error) {
	n := codeIntZero - int(code)
	p, err := d.need(n, code, "integer")
	if err != nil {
		return nil, err
	}
	if p[0] == 0xff {
		return nil, d.fail(d.start, int(code), "integer is not minimally encoded (leading zero byte)")
	}
	var m uint64
	for _, c := range p {
		m = m<<8 | uint64(^c)
	}
	if m <= 1<<63 {
		return -int64(m), nil // for m == 1<<63 this wraps to MinInt64, as wanted
	}
	return new(big.Int).Neg(new(big.Int).SetUint64(m)), nil
}

// bigInt decodes codes 0x0b and 0x1d: a length byte (inverted for
// negatives) and a 9..255 byte magnitude (one's complemented for negatives),
// or the 8 0xff magnitude bytes of the Python binding's ±(2^64-1).
func (d *decoder) bigInt(code byte) (any, error) {
	at := d.start
	lb, err := d.need(1, code, "integer length")
	if err != nil {
		return nil, err
	}
	neg := code == codeNegBig
	n := int(lb[0])
	if neg {
		n = int(^lb[0])
	}
	if n < 8 {
		return nil, d.fail(at, int(code), "%d-byte integer must use a fixed-width code", n)
	}
	p, err := d.need(n, code, "integer")
	if err != nil {
		return nil, err
	}
	mag := p
	if neg {
		mag = make([]byte, n)
		for i, c := range p {
			mag[i] = ^c
		}
	}
	if n == 8 {
		// FDB's Python binding writes 2^64-1 and -(2^64-1), and only
		// those, with these codes and a length of 8 (tuple.py _encode).
		if !isAllFF(mag) {
			return nil, d.fail(at, int(code), "%d-byte integer must use a fixed-width code", n)
		}
		if !neg {
			return uint64(math.MaxUint64), nil
		}
	}
	if mag[0] == 0x00 {
		return nil, d.fail(at, int(code), "integer is not minimally encoded (leading zero byte)")
	}
	v := new(big.Int).SetBytes(mag)
	if neg {
		v.Neg(v)
	}
	return v, nil
}

func isAllFF(b []byte) bool {
	for _, c := range b {
		if c != 0xff {
			return false
		}
	}
	return true
}
