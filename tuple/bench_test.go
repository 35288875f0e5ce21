package tuple_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/tuple"
)

// A typical queue key: a subspace prefix, then (index, 20-byte item ID).

func queueKeyParts(b *testing.B) (prefix []byte, t tuple.Tuple) {
	b.Helper()
	r := rand.New(rand.NewPCG(7, 7))
	prefix, err := tuple.Tuple{"fdbqueue", "jobs", int64(1)}.Pack()
	require.NoError(b, err)
	id := make([]byte, 20)
	for i := range id {
		id[i] = byte(r.Uint32())
	}
	return prefix, tuple.Tuple{int64(1_234_567_890), id}
}

var sinkBytes []byte
var sinkTuple tuple.Tuple

// BenchmarkPackQueueKey: Pack alone (one allocation, the result).
func BenchmarkPackQueueKey(b *testing.B) {
	_, t := queueKeyParts(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		key, err := t.Pack()
		if err != nil {
			b.Fatal(err)
		}
		sinkBytes = key
	}
}

// BenchmarkPackQueueKeyWithPrefix: prefix + packed tuple as a new key, by
// appending to a full-capacity view of the prefix (one allocation).
func BenchmarkPackQueueKeyWithPrefix(b *testing.B) {
	prefix, t := queueKeyParts(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		key, err := t.AppendPack(prefix[:len(prefix):len(prefix)])
		if err != nil {
			b.Fatal(err)
		}
		sinkBytes = key
	}
}

// BenchmarkAppendPackQueueKeyReuse: into a reused buffer (no allocation).
func BenchmarkAppendPackQueueKeyReuse(b *testing.B) {
	prefix, t := queueKeyParts(b)
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var err error
		buf, err = t.AppendPack(append(buf[:0], prefix...))
		if err != nil {
			b.Fatal(err)
		}
	}
	sinkBytes = buf
}

// BenchmarkPackQueueKeyFreshTuple builds the tuple each time with a
// changing index, as a queue does; boxing the int64 costs an allocation.
func BenchmarkPackQueueKeyFreshTuple(b *testing.B) {
	prefix, t := queueKeyParts(b)
	id := t[1].([]byte)
	buf := make([]byte, 0, 128)
	i := int64(1_000_000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		i++
		var err error
		buf, err = tuple.Tuple{i, id}.AppendPack(append(buf[:0], prefix...))
		if err != nil {
			b.Fatal(err)
		}
	}
	sinkBytes = buf
}

// BenchmarkUnpackQueueKey decodes the tuple part of a queue key.
func BenchmarkUnpackQueueKey(b *testing.B) {
	prefix, t := queueKeyParts(b)
	key, err := t.AppendPack(prefix[:len(prefix):len(prefix)])
	require.NoError(b, err)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		got, err := tuple.Unpack(key[len(prefix):])
		if err != nil {
			b.Fatal(err)
		}
		sinkTuple = got
	}
}

// BenchmarkCompareQueueKeys compares two keys that differ in the last byte.
func BenchmarkCompareQueueKeys(b *testing.B) {
	_, t := queueKeyParts(b)
	id2 := append([]byte{}, t[1].([]byte)...)
	id2[19]++
	u := tuple.Tuple{t[0], id2}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if tuple.Compare(t, u) >= 0 {
			b.Fatal("wrong order")
		}
	}
}

// TestQueueKeyAllocations pins the allocation counts the benchmarks show,
// so a regression fails the ordinary test run.
func TestQueueKeyAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	prefix, err := tuple.Tuple{"fdbqueue", "jobs"}.Pack()
	require.NoError(t, err)
	tp := tuple.Tuple{int64(1_234_567_890), make([]byte, 20)}
	buf := make([]byte, 0, 128)
	pack := testing.AllocsPerRun(100, func() { sinkBytes, _ = tp.Pack() })
	withPrefix := testing.AllocsPerRun(100, func() { sinkBytes, _ = tp.AppendPack(prefix[:len(prefix):len(prefix)]) })
	reuse := testing.AllocsPerRun(100, func() { buf, _ = tp.AppendPack(append(buf[:0], prefix...)) })
	require.LessOrEqual(t, pack, 1.0, "Pack")
	require.LessOrEqual(t, withPrefix, 1.0, "AppendPack onto a full prefix")
	require.Zero(t, reuse, "AppendPack into a reused buffer")
}
