package tuplediff_test

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"os"
	"strings"
	"testing"

	"github.com/apple/foundationdb/bindings/go/src/fdb"
	ftuple "github.com/apple/foundationdb/bindings/go/src/fdb/tuple"

	"github.com/fdbqueue/fdbqueue/tuple"
)

// apiVersion is at least 520, the version from which PackWithVersionstamp
// appends a 4-byte offset (bindings/go/src/fdb/tuple/tuple.go,
// PackWithVersionstamp: "if apiVersion < 520 { ... PutUint16 } else {
// ... PutUint32 }"; release-notes-520.rst: "Updated the
// SET_VERSIONSTAMPED_KEY atomic operation to take four bytes to specify the
// offset instead of two"). Our PackWithVersionstamp writes only that layout.
const apiVersion = 730

func TestMain(m *testing.M) {
	// A real libfdb_c accepts the selection without a cluster; the stub of
	// fdbkv/internal/fdbcstub only when asked to (see its fdb_c_stub.c).
	if err := os.Setenv("FDBCSTUB_SELECT_API_VERSION", "1"); err != nil {
		fmt.Fprintln(os.Stderr, "tuplediff:", err)
		os.Exit(1)
	}
	if err := fdb.APIVersion(apiVersion); err != nil {
		fmt.Fprintf(os.Stderr, "tuplediff: fdb.APIVersion(%d): %v\n", apiVersion, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// toFDB maps our tuple to the binding's. The binding packs int, int64,
// uint, uint64, *big.Int and big.Int but panics on the narrower Go integer
// types, which ours also accepts: those become int64 or uint64, the same
// value (ours packs an integer by value, whatever its Go type).
func toFDB(t tuple.Tuple) ftuple.Tuple {
	if t == nil {
		return nil
	}
	out := make(ftuple.Tuple, len(t))
	for i, e := range t {
		out[i] = elemToFDB(e)
	}
	return out
}

func elemToFDB(e any) any {
	switch v := e.(type) {
	case tuple.Tuple:
		return toFDB(v)
	case int8:
		return int64(v)
	case int16:
		return int64(v)
	case int32:
		return int64(v)
	case uint8:
		return uint64(v)
	case uint16:
		return uint64(v)
	case uint32:
		return uint64(v)
	case tuple.UUID:
		return ftuple.UUID(v)
	case tuple.Versionstamp:
		return ftuple.Versionstamp{TransactionVersion: v.TransactionVersion, UserVersion: v.UserVersion}
	default:
		return e
	}
}

// canon renders a tuple of either package (and the elements of either) as a
// string that is equal exactly when the tuples hold the same values. With
// typed, integers also show the Go type Unpack chose (int64, uint64 or
// *big.Int); without it, only their value. Floats show their bits, so NaN
// payloads and -0 count.
func canon(t any, typed bool) string {
	var sb strings.Builder
	writeCanon(&sb, t, typed)
	return sb.String()
}

func writeCanon(sb *strings.Builder, e any, typed bool) {
	writeList := func(n int, at func(int) any) {
		sb.WriteByte('(')
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeCanon(sb, at(i), typed)
		}
		sb.WriteByte(')')
	}
	intCanon := func(kind string, v *big.Int) {
		if typed {
			sb.WriteString(kind)
		} else {
			sb.WriteString("int")
		}
		sb.WriteString(":" + v.String())
	}
	switch v := e.(type) {
	case nil:
		sb.WriteString("nil")
	case tuple.Tuple:
		writeList(len(v), func(i int) any { return v[i] })
	case ftuple.Tuple:
		writeList(len(v), func(i int) any { return v[i] })
	case []byte:
		sb.WriteString("b:" + hex.EncodeToString(v))
	case string:
		sb.WriteString("s:" + hex.EncodeToString([]byte(v)))
	case int:
		intCanon(fmt.Sprintf("%T", v), big.NewInt(int64(v)))
	case int8:
		intCanon(fmt.Sprintf("%T", v), big.NewInt(int64(v)))
	case int16:
		intCanon(fmt.Sprintf("%T", v), big.NewInt(int64(v)))
	case int32:
		intCanon(fmt.Sprintf("%T", v), big.NewInt(int64(v)))
	case int64:
		intCanon(fmt.Sprintf("%T", v), big.NewInt(v))
	case uint:
		intCanon(fmt.Sprintf("%T", v), new(big.Int).SetUint64(uint64(v)))
	case uint8:
		intCanon(fmt.Sprintf("%T", v), new(big.Int).SetUint64(uint64(v)))
	case uint16:
		intCanon(fmt.Sprintf("%T", v), new(big.Int).SetUint64(uint64(v)))
	case uint32:
		intCanon(fmt.Sprintf("%T", v), new(big.Int).SetUint64(uint64(v)))
	case uint64:
		intCanon(fmt.Sprintf("%T", v), new(big.Int).SetUint64(v))
	case *big.Int:
		intCanon("big", v)
	case big.Int:
		intCanon("bigval", &v)
	case float32:
		fmt.Fprintf(sb, "f32:%08x", math.Float32bits(v))
	case float64:
		fmt.Fprintf(sb, "f64:%016x", math.Float64bits(v))
	case bool:
		fmt.Fprintf(sb, "bool:%v", v)
	case tuple.UUID:
		sb.WriteString("uuid:" + hex.EncodeToString(v[:]))
	case ftuple.UUID:
		sb.WriteString("uuid:" + hex.EncodeToString(v[:]))
	case tuple.Versionstamp:
		fmt.Fprintf(sb, "vs:%x:%d", v.TransactionVersion, v.UserVersion)
	case ftuple.Versionstamp:
		fmt.Fprintf(sb, "vs:%x:%d", v.TransactionVersion, v.UserVersion)
	default:
		fmt.Fprintf(sb, "?%T", v)
	}
}

// fdbPack is the binding's Pack, with its panics turned into an error.
func fdbPack(t ftuple.Tuple) (b []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("binding's Pack panicked: %v", r)
		}
	}()
	return t.Pack(), nil
}

// fdbUnpack is the binding's Unpack; panicked says it panicked (on many
// malformed inputs it indexes past the end of its input) rather than
// returning an error.
func fdbUnpack(b []byte) (t ftuple.Tuple, err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			t, err, panicked = nil, fmt.Errorf("binding's Unpack panicked: %v", r), true
		}
	}()
	t, err = ftuple.Unpack(b)
	return t, err, false
}

// oursUnpack is our Unpack; a panic is reported as one (a defect: ours
// must never panic).
func oursUnpack(b []byte) (t tuple.Tuple, err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			t, err, panicked = nil, fmt.Errorf("our Unpack panicked: %v", r), true
		}
	}()
	t, err = tuple.Unpack(b)
	return t, err, false
}

// stampOffset reads the 4-byte little-endian offset that ends a key made by
// PackWithVersionstamp (API version >= 520).
func stampOffset(key []byte) (body []byte, offset uint32) {
	return key[:len(key)-4], binary.LittleEndian.Uint32(key[len(key)-4:])
}
