package tuple_test

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/tuple"
)

// The golden file is written by testdata/golden.mjs (`make golden`) from the
// npm package fdb-tuple, an independent implementation. These tests only
// read it, so they need no Node.js.

type goldenElem struct {
	Type        string       `json:"type"`
	Value       any          `json:"value"`
	Bits        string       `json:"bits"`
	Hex         string       `json:"hex"`
	Items       []goldenElem `json:"items"`
	UserVersion *uint16      `json:"user_version"`
}

type goldenEntry struct {
	Name        string       `json:"name"`
	Elements    []goldenElem `json:"elements"`
	Packed      string       `json:"packed"`
	StampOffset *uint32      `json:"stamp_offset"`
}

type goldenFile struct {
	Generator      string        `json:"generator"`
	Tuples         []goldenEntry `json:"tuples"`
	Versionstamped []goldenEntry `json:"versionstamped"`
}

func loadGolden(t *testing.T) goldenFile {
	t.Helper()
	raw, err := os.ReadFile("testdata/golden.json")
	require.NoError(t, err, "run `make golden` to create it")
	var g goldenFile
	require.NoError(t, json.Unmarshal(raw, &g))
	require.GreaterOrEqual(t, len(g.Tuples), 300, "golden file is too small")
	return g
}

// buildTuple turns a golden description into the typed tuple Unpack must
// return (so integers are normalised to int64, uint64 or *big.Int).
func buildTuple(t *testing.T, elems []goldenElem) tuple.Tuple {
	t.Helper()
	out := tuple.Tuple{}
	for _, e := range elems {
		out = append(out, buildElem(t, e))
	}
	return out
}

func buildElem(t *testing.T, e goldenElem) any {
	t.Helper()
	decodeHex := func(s string, n int) []byte {
		b, err := hex.DecodeString(s)
		require.NoError(t, err, "hex %q", s)
		if n >= 0 {
			require.Len(t, b, n, "hex %q", s)
		}
		return b
	}
	switch e.Type {
	case "null":
		return nil
	case "bool":
		v, ok := e.Value.(bool)
		require.True(t, ok, "bool value %v", e.Value)
		return v
	case "int":
		s, ok := e.Value.(string)
		require.True(t, ok, "int value %v", e.Value)
		v, ok := new(big.Int).SetString(s, 10)
		require.True(t, ok, "int value %q", s)
		switch {
		case v.IsInt64():
			return v.Int64()
		case v.IsUint64():
			return v.Uint64()
		default:
			return v
		}
	case "float32":
		u, err := strconv.ParseUint(e.Bits, 16, 32)
		require.NoError(t, err)
		return math.Float32frombits(uint32(u))
	case "float64":
		u, err := strconv.ParseUint(e.Bits, 16, 64)
		require.NoError(t, err)
		return math.Float64frombits(u)
	case "bytes":
		return decodeHex(e.Hex, -1)
	case "string":
		s, ok := e.Value.(string)
		require.True(t, ok, "string value %v", e.Value)
		return s
	case "uuid":
		return tuple.UUID(decodeHex(e.Hex, 16))
	case "versionstamp":
		b := decodeHex(e.Hex, 12)
		return tuple.Versionstamp{TransactionVersion: [10]byte(b[:10]), UserVersion: binary.BigEndian.Uint16(b[10:])}
	case "tuple":
		return buildTuple(t, e.Items)
	case "incomplete_versionstamp":
		require.NotNil(t, e.UserVersion)
		return tuple.IncompleteVersionstamp(*e.UserVersion)
	}
	require.Fail(t, "unknown golden element type "+e.Type)
	return nil
}

func TestGoldenPackMatchesFdbTuple(t *testing.T) {
	g := loadGolden(t)
	for i, e := range g.Tuples {
		tp := buildTuple(t, e.Elements)
		got, err := tp.Pack()
		require.NoError(t, err, "golden %d %q: Pack(%v)", i, e.Name, tp)
		assert.Equal(t, e.Packed, hex.EncodeToString(got), "golden %d %q: Pack(%v)", i, e.Name, tp)
	}
}

func TestGoldenUnpackMatchesFdbTuple(t *testing.T) {
	g := loadGolden(t)
	for i, e := range g.Tuples {
		want := buildTuple(t, e.Elements)
		packed, err := hex.DecodeString(e.Packed)
		require.NoError(t, err)
		got, err := tuple.Unpack(packed)
		require.NoError(t, err, "golden %d %q: Unpack(%s)", i, e.Name, e.Packed)
		requireSameTuple(t, want, got, "golden %d %q", i, e.Name)
	}
}

// TestGoldenOrderMatchesCompare checks Compare against the byte order of
// keys packed by the other implementation, over every pair.
func TestGoldenOrderMatchesCompare(t *testing.T) {
	g := loadGolden(t)
	tuples := make([]tuple.Tuple, len(g.Tuples))
	packed := make([][]byte, len(g.Tuples))
	for i, e := range g.Tuples {
		tuples[i] = buildTuple(t, e.Elements)
		packed[i] = mustHex(t, e.Packed)
	}
	for i := range tuples {
		for j := range tuples {
			want := bytesCompare(packed[i], packed[j])
			if got := tuple.Compare(tuples[i], tuples[j]); got != want {
				require.Fail(t, fmt.Sprintf("Compare(%v, %v) = %d, byte order of fdb-tuple's packing says %d", tuples[i], tuples[j], got, want))
			}
		}
	}
}

func TestGoldenVersionstampedKeys(t *testing.T) {
	g := loadGolden(t)
	require.NotEmpty(t, g.Versionstamped)
	for i, e := range g.Versionstamped {
		require.NotNil(t, e.StampOffset, "entry %d", i)
		tp := buildTuple(t, e.Elements)
		has, err := tp.HasIncompleteVersionstamp()
		require.NoError(t, err)
		require.True(t, has, "entry %d %q", i, e.Name)

		want := binary.LittleEndian.AppendUint32(mustHex(t, e.Packed), *e.StampOffset)
		got, err := tp.PackWithVersionstamp(nil)
		require.NoError(t, err, "entry %d %q", i, e.Name)
		assert.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got), "entry %d %q: PackWithVersionstamp(%v)", i, e.Name, tp)

		// With a prefix, the offset moves by the prefix length.
		prefix := []byte{0xfe, 0x00, 0x01}
		got, err = tp.PackWithVersionstamp(prefix)
		require.NoError(t, err)
		wantPrefixed := binary.LittleEndian.AppendUint32(append(append([]byte{}, prefix...), mustHex(t, e.Packed)...), *e.StampOffset+uint32(len(prefix)))
		assert.Equal(t, hex.EncodeToString(wantPrefixed), hex.EncodeToString(got), "entry %d %q with prefix", i, e.Name)
	}
}
