package fdbqueue

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fdbqueue/fdbqueue/tuple"
)

// slowIndex is parseIndexed's full path: the index of an (int64, []byte)
// tuple under prefix, ok false for any other key.
func slowIndex(key, prefix []byte) (int64, bool) {
	t, err := Subspace{prefix: prefix}.Unpack(key)
	if err != nil || len(t) != 2 {
		return 0, false
	}
	i, ok := t[0].(int64)
	if _, isBytes := t[1].([]byte); !ok || !isBytes {
		return 0, false
	}
	return i, true
}

// checkFast requires parseIndexedFast to accept only keys the full path
// accepts, with the same index.
func checkFast(t testing.TB, key, prefix []byte) {
	fi, fok := parseIndexedFast(key, prefix)
	si, sok := slowIndex(key, prefix)
	if fok && (!sok || fi != si) {
		t.Fatalf("key %x: fast path gives %d, full unpack %d (ok %v)", key, fi, si, sok)
	}
}

// TestParseIndexedFast compares the fast path with a full unpack over
// indexes at every width and limit, escaped suffixes, and corrupted keys,
// and requires the fast path to take the keys the queue writes.
func TestParseIndexedFast(t *testing.T) {
	prefix := []byte("\x02q\x00")
	r := rand.New(rand.NewPCG(3, 4))
	indexes := []int64{0, 1, 0xff, 0x100, math.MaxInt32, math.MaxInt64 - 1, math.MaxInt64, -1, math.MinInt64}
	for range 200 {
		indexes = append(indexes, r.Int64N(math.MaxInt64)>>r.IntN(63))
	}
	suffixes := [][]byte{{}, {0}, {0, 0}, {0xff}, {0, 0xff}, make([]byte, 20)}
	for range 50 {
		s := make([]byte, 20)
		for i := range s {
			s[i] = byte(r.IntN(4)) * 0x55 // many 0x00 and 0xff
		}
		suffixes = append(suffixes, s)
	}
	own := 0 // keys of the shape writeIndexed gives (ownIndexed)
	for range 50 {
		s := make([]byte, suffixSize)
		for i := range s {
			s[i] = byte(1 + r.IntN(255)) // no 0x00, as entropy.fill makes them
		}
		suffixes = append(suffixes, s)
	}
	for _, i := range indexes {
		for _, s := range suffixes {
			if key, _ := (tuple.Tuple{i, s}).AppendPack(nil); i >= 0 && len(s) == suffixSize && bytes.IndexByte(s, 0) < 0 {
				if _, ok := ownIndexed(key); !ok {
					t.Fatalf("(%d, %x): not the queue's own shape", i, s)
				}
				own++
			}
			key, err := tuple.Tuple{i, s}.AppendPack(append([]byte(nil), prefix...))
			if err != nil {
				t.Fatal(err)
			}
			checkFast(t, key, prefix)
			if got, ok := parseIndexedFast(key, prefix); !ok || got != i {
				t.Fatalf("(%d, %x): fast path gives %d, %v", i, s, got, ok)
			}
			for range 20 { // corrupt, shorten or extend the key
				k := append([]byte(nil), key...)
				switch r.IntN(3) {
				case 0:
					k[r.IntN(len(k))] = byte(r.IntN(256))
				case 1:
					k = k[:r.IntN(len(k))]
				default:
					k = append(k, byte(r.IntN(256)))
				}
				checkFast(t, k, prefix)
			}
		}
	}
	if own == 0 {
		t.Fatal("no key of the queue's own shape tested")
	}
	for _, other := range []tuple.Tuple{{int64(1)}, {int64(1), "s"}, {int64(1), []byte{1}, int64(2)}, {uint64(math.MaxUint64), []byte{1}}} {
		key, _ := other.AppendPack(append([]byte(nil), prefix...))
		checkFast(t, key, prefix)
	}
}

// FuzzParseIndexedFast: the fast path never accepts a key the full unpack
// rejects, nor gives another index.
func FuzzParseIndexedFast(f *testing.F) {
	f.Add([]byte("\x02q\x00\x15\x07\x01ab\x00\xff\x00"))
	f.Add([]byte("\x02q\x00\x14\x01\x00"))
	f.Fuzz(func(t *testing.T, key []byte) {
		checkFast(t, key, []byte("\x02q\x00"))
	})
}
