package fdbqueue

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/tuple"
)

// TestHandPackedKeys checks the keys the hot paths pack by hand against
// the tuple package's packing of the same elements, for every user
// version and priority limit, under prefixes with and without 0x00 bytes.
func TestHandPackedKeys(t *testing.T) {
	src := rand.New(rand.NewPCG(5, 6))
	noise := make([]byte, 1<<16)
	for i := range noise {
		noise[i] = byte(src.IntN(3)) // many 0x00 bytes, which the suffix must not hold
	}
	for _, prefix := range [][]byte{{0x02, 'q', 0x00}, {0x00}, bytes.Repeat([]byte{0xff}, 300)} {
		for _, uv := range []uint16{0, 1, 0xff, 0x100, math.MaxUint16} {
			a, b := newEntropy(bytes.NewReader(noise)), newEntropy(bytes.NewReader(noise))
			got, err := appendVersionstampedKey(nil, prefix, uv, a)
			if err != nil {
				t.Fatal(err)
			}
			suffix, err := b.suffix()
			if err != nil {
				t.Fatal(err)
			}
			want, err := tuple.Tuple{tuple.IncompleteVersionstamp(uv), suffix}.PackWithVersionstamp(prefix)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("uv %d: hand-packed %x, tuple %x", uv, got, want)
			}
		}
		for _, v := range []int64{0, 1, -1, 0xff, -0x100, math.MaxInt64, math.MinInt64} {
			e := newEntropy(bytes.NewReader(noise))
			got, err := e.appendSuffix(tupleIntKey(t, prefix, v))
			if err != nil {
				t.Fatal(err)
			}
			k := got[len(prefix):]
			want, _ := tuple.Tuple{v, k[len(k)-suffixKeySize+1 : len(k)-1]}.AppendPack(bytes.Clone(prefix))
			if !bytes.Equal(got, want) || bytes.IndexByte(got[len(got)-suffixKeySize+1:len(got)-1], 0) >= 0 {
				t.Fatalf("%d: hand-packed %x, tuple %x", v, got, want)
			}
			if i, ok := parseIndexedFast(got, prefix); !ok || i != v {
				t.Fatalf("%d: parseIndexedFast gives %d, %v", v, i, ok)
			}
		}
	}
	if _, err := newEntropy(bytes.NewReader(nil)).appendSuffix(nil); err == nil {
		t.Fatal("appendSuffix of an exhausted entropy source: no error")
	}
}

func tupleIntKey(t *testing.T, prefix []byte, v int64) []byte {
	k, err := tuple.Tuple{v}.AppendPack(bytes.Clone(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestParsePriorityFast compares the priority queue's fast key parser with
// the full unpack: it accepts only keys the full path accepts, with the
// same priority and count, and takes every key a push writes.
func TestParsePriorityFast(t *testing.T) {
	prefix := []byte("\x02pq\x00")
	pq := &PriorityQueue{layer: layer{sub: Subspace{prefix: prefix}}}
	r := rand.New(rand.NewPCG(7, 8))
	ints := []int64{0, 1, -1, 0xff, -0xff, 0x100, -0x100, math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	for range 30 {
		ints = append(ints, (r.Int64()>>r.IntN(63))*int64(1-2*r.IntN(2)))
	}
	own := make([]byte, suffixSize) // a suffix as pushAttempt writes it: no 0x00
	for i := range own {
		own[i] = byte(1 + r.IntN(255))
	}
	for _, p := range ints {
		for i, c := range append(ints, ints...) {
			suffix := []byte{0, 1, 0xff}
			if i >= len(ints) {
				suffix = own
				if _, ok := ownIndexed(tupleIntKey(t, nil, c)); c >= 0 && ok {
					t.Fatal("ownIndexed takes a key without a suffix")
				}
			}
			key, _ := tuple.Tuple{p, c, suffix}.AppendPack(bytes.Clone(prefix))
			if fp, fc, ok := parsePriorityFast(key, prefix); !ok || fp != p || fc != c {
				t.Fatalf("(%d, %d): fast path gives %d, %d, %v", p, c, fp, fc, ok)
			}
			for range 10 {
				k := bytes.Clone(key)
				switch r.IntN(3) {
				case 0:
					k[r.IntN(len(k))] = byte(r.IntN(256))
				case 1:
					k = k[:r.IntN(len(k))]
				default:
					k = append(k, byte(r.IntN(256)))
				}
				fp, fc, ok := parsePriorityFast(k, prefix)
				if !ok {
					continue
				}
				// The full path (parse without the fast one).
				tu, err := pq.sub.Unpack(k)
				if err != nil || len(tu) != 3 {
					t.Fatalf("key %x: fast path accepts, full unpack: %v, %v", k, tu, err)
				}
				sp, ok1 := tu[0].(int64)
				sc, ok2 := tu[1].(int64)
				_, ok3 := tu[2].([]byte)
				if !ok1 || !ok2 || !ok3 || sp != fp || sc != fc {
					t.Fatalf("key %x: fast path gives %d, %d; full unpack %v", k, fp, fc, tu)
				}
			}
		}
	}
	for _, other := range []tuple.Tuple{{int64(1), int64(2)}, {int64(1), int64(2), "s"}, {uint64(math.MaxUint64), int64(1), []byte{1}}, {int64(1), []byte{1}}} {
		key, _ := other.AppendPack(bytes.Clone(prefix))
		if _, _, ok := parsePriorityFast(key, prefix); ok {
			t.Fatalf("%v: fast path accepts a foreign key", other)
		}
	}
}

// TestRecordKeyLengths checks the record key lengths the budget computes
// without building the keys against the keys themselves, for IDs with
// 0x00 bytes (escaped when packed) and every kind of shard.
func TestRecordKeyLengths(t *testing.T) {
	j := newJournal([]byte("\x02q\x00"), config{retention: time.Minute, now: time.Now})
	r := rand.New(rand.NewPCG(9, 10))
	for i := range 500 {
		var id OpID
		for k := range id {
			id[k] = byte(r.IntN(3)) // many 0x00 bytes
		}
		id[8] = byte(i) // shard 0 packs shorter than the others
		o := &op{j: j, id: id}
		rr := o.recordRange()
		if m := o.recordPrefixLen(); len(rr.Begin) != m || len(rr.End) != m+1 {
			t.Fatalf("id %x: record range %d, %d bytes; computed %d", id, len(rr.Begin), len(rr.End), m)
		}
		for _, n := range []int{0, 1, 255, 256, 1 << 20} {
			if got, want := o.recordKeyLen(n), len(o.recordKey(n)); got != want {
				t.Fatalf("id %x, record %d: computed %d bytes, key %d", id, n, got, want)
			}
		}
	}
}

// TestVersionstampKeyFast compares the versionstamp layout's fast key
// check with the full unpack: it accepts only keys the full check
// accepts, and every key an enqueue writes (once completed).
func TestVersionstampKeyFast(t *testing.T) {
	prefix := []byte("\x02vs\x00")
	q := &Queue{layer: layer{sub: Subspace{prefix: prefix}, cfg: config{versionstamps: true}}}
	r := rand.New(rand.NewPCG(11, 12))
	for range 2000 {
		var vs tuple.Versionstamp
		for k := range vs.TransactionVersion {
			vs.TransactionVersion[k] = byte(r.IntN(3)) * 0x7f
		}
		vs.UserVersion = uint16(r.IntN(1 << 16))
		suffix := make([]byte, r.IntN(24))
		for k := range suffix {
			suffix[k] = byte(r.IntN(3)) * 0x7f
		}
		key, err := tuple.Tuple{vs, suffix}.AppendPack(bytes.Clone(prefix))
		if err != nil {
			t.Fatal(err)
		}
		if !versionstampKeyFast(key, prefix) {
			t.Fatalf("%x: fast check refuses a written key", key)
		}
		for range 10 {
			k := bytes.Clone(key)
			switch r.IntN(3) {
			case 0:
				k[r.IntN(len(k))] = byte(r.IntN(256))
			case 1:
				k = k[:r.IntN(len(k))]
			default:
				k = append(k, byte(r.IntN(256)))
			}
			if !versionstampKeyFast(k, prefix) {
				continue
			}
			tu, err := q.sub.Unpack(k)
			if err != nil || len(tu) != 2 {
				t.Fatalf("key %x: fast check accepts, full unpack: %v, %v", k, tu, err)
			}
			if _, ok := tu[0].(tuple.Versionstamp); !ok {
				t.Fatalf("key %x: fast check accepts, first element %T", k, tu[0])
			}
		}
	}
	for _, other := range []tuple.Tuple{{int64(1), []byte{1}}, {tuple.Versionstamp{}}, {tuple.Versionstamp{}, "s"}} {
		key, _ := other.AppendPack(bytes.Clone(prefix))
		if versionstampKeyFast(key, prefix) {
			t.Fatalf("%v: fast check accepts a foreign key", other)
		}
	}
}

// TestEntropyOwnGenerator checks the default generator's fast fill
// against its definition: the words of the same ChaCha8 stream, little
// endian, 20 bytes of every 24, each 0x00 byte made 0x01. Enough draws
// that words with 0x00 bytes (one in about 32) occur.
func TestEntropyOwnGenerator(t *testing.T) {
	seed := [32]byte{1, 2, 3}
	own := rand.NewChaCha8(seed)
	e := &entropy{r: own, own: own}
	ref := rand.NewChaCha8(seed)
	fixed := 0
	for i := range 5000 {
		got, err := e.suffix()
		if err != nil {
			t.Fatal(err)
		}
		var want [24]byte
		for j := range 3 {
			binary.LittleEndian.PutUint64(want[8*j:], ref.Uint64())
		}
		for j, c := range want[:suffixSize] {
			if c == 0 {
				want[j] = 1
				fixed++
			}
		}
		if !bytes.Equal(got, want[:suffixSize]) {
			t.Fatalf("draw %d: %x, want %x", i, got, want[:suffixSize])
		}
	}
	if fixed == 0 {
		t.Fatal("no 0x00 byte drawn: the replacement went untested")
	}
	if e := newEntropy(nil); e.own == nil || e.r != io.Reader(e.own) {
		t.Fatal("the default entropy does not use its own generator")
	}
}

// TestHasZeroByte compares the bit trick with a byte loop, on words with
// a 0x00 byte at each place, around each place and none.
func TestHasZeroByte(t *testing.T) {
	src := rand.New(rand.NewPCG(7, 8))
	for range 100000 {
		w := src.Uint64()
		switch src.IntN(4) {
		case 0:
			w &^= 0xff << (8 * src.IntN(8)) // a zero byte
		case 1:
			w = w&^(0xff<<(8*src.IntN(8))) | 1<<(8*src.IntN(8)) // a 0x01 byte, maybe
		case 2:
			w |= 0x0101010101010101 // none
		}
		want := false
		for i := range 8 {
			if byte(w>>(8*i)) == 0 {
				want = true
			}
		}
		if got := hasZeroByte(w); got != want {
			t.Fatalf("%016x: hasZeroByte %v, want %v", w, got, want)
		}
	}
}

// TestAppendPackedInt compares the hand packing of an integer element
// with the tuple package's, at every length boundary and on random values.
func TestAppendPackedInt(t *testing.T) {
	vals := []int64{0, math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	for i := range 64 {
		for _, d := range []int64{-1, 0, 1} {
			vals = append(vals, int64(1)<<i+d, -(int64(1)<<i)+d)
		}
	}
	src := rand.New(rand.NewPCG(9, 10))
	for range 10000 {
		vals = append(vals, int64(src.Uint64())>>src.IntN(64))
	}
	for _, v := range vals {
		prefix := []byte{0x02, 'p', 0x00}
		want, err := tuple.Tuple{v}.AppendPack(bytes.Clone(prefix))
		require.NoError(t, err)
		if got := appendPackedInt(bytes.Clone(prefix), v); !bytes.Equal(got, want) {
			t.Fatalf("%d: hand-packed %x, tuple %x", v, got, want)
		}
	}
}
