package tuple_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/tuple"
)

// mustHex decodes hex that may contain spaces, failing the test on error.
func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	require.NoError(t, err, "bad hex in test: %q", s)
	return b
}

// mustPack packs tp, failing the test on error.
func mustPack(t testing.TB, tp tuple.Tuple) []byte {
	t.Helper()
	b, err := tp.Pack()
	require.NoError(t, err, "Pack(%v)", tp)
	return b
}

// requireSameTuple fails unless got and want hold the same element types
// and values, recursively. Floats compare by bits (so NaNs with equal
// payloads are equal), big integers by value.
func requireSameTuple(t testing.TB, want, got tuple.Tuple, msgAndArgs ...any) {
	t.Helper()
	if diff := tupleDiff(want, got, "t"); diff != "" {
		require.Fail(t, fmt.Sprintf("tuples differ: %s\nwant %v\n got %v", diff, want, got), msgAndArgs...)
	}
}

// tupleDiff describes the first difference between want and got, or "".
func tupleDiff(want, got tuple.Tuple, path string) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%s: length %d, want %d", path, len(got), len(want))
	}
	for i := range want {
		p := fmt.Sprintf("%s[%d]", path, i)
		w, g := want[i], got[i]
		if reflect.TypeOf(w) != reflect.TypeOf(g) {
			return fmt.Sprintf("%s: type %T, want %T", p, g, w)
		}
		switch w := w.(type) {
		case tuple.Tuple:
			if d := tupleDiff(w, g.(tuple.Tuple), p); d != "" {
				return d
			}
		case float32:
			if math.Float32bits(w) != math.Float32bits(g.(float32)) {
				return fmt.Sprintf("%s: float32 bits %08x, want %08x", p, math.Float32bits(g.(float32)), math.Float32bits(w))
			}
		case float64:
			if math.Float64bits(w) != math.Float64bits(g.(float64)) {
				return fmt.Sprintf("%s: float64 bits %016x, want %016x", p, math.Float64bits(g.(float64)), math.Float64bits(w))
			}
		case *big.Int:
			if w.Cmp(g.(*big.Int)) != 0 {
				return fmt.Sprintf("%s: %v, want %v", p, g, w)
			}
		default:
			if !reflect.DeepEqual(w, g) {
				return fmt.Sprintf("%s: %#v, want %#v", p, g, w)
			}
		}
	}
	return ""
}

func bigFromString(t testing.TB, s string) *big.Int {
	t.Helper()
	v, ok := new(big.Int).SetString(s, 0)
	require.True(t, ok, "bad big integer in test: %q", s)
	return v
}

// bytesCompare is bytes.Compare, named for readability in order tests.
func bytesCompare(a, b []byte) int { return bytes.Compare(a, b) }
