package fdbqueue

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// ValueEncoding is how an item's bytes are stored as the FDB value. It
// exists so that Go programs can share a queue with the FoundationDB
// recipes: the Python recipe stores the raw bytes, the Java recipe stores the
// value as a one-element packed tuple.
//
// A worked example, the item "hi" (0x68 0x69):
//
//	RawValues:   value = 68 69
//	TupleValues: value = 01 68 69 00   (tuple ("hi" as bytes,): code 01, bytes, terminator 00)
//
// With TupleValues, a value another client packed as a string element (code
// 02) is returned as its UTF-8 bytes.
type ValueEncoding int

const (
	// RawValues stores the item's bytes as the value (Python recipe).
	RawValues ValueEncoding = iota
	// TupleValues stores tuple.Tuple{item}.Pack() (Java recipe).
	TupleValues
)

// encode turns item bytes into the stored value.
func (e ValueEncoding) encode(item []byte) ([]byte, error) {
	if e == TupleValues {
		return tuple.Tuple{item}.Pack()
	}
	return item, nil
}

// decode turns a stored value into the item's bytes.
func (e ValueEncoding) decode(stored []byte) ([]byte, error) {
	if e != TupleValues {
		return stored, nil
	}
	t, err := tuple.Unpack(stored)
	if err != nil {
		return nil, fmt.Errorf("%w: stored value is not a packed tuple: %w", ErrCodec, err)
	}
	if len(t) != 1 {
		return nil, fmt.Errorf("%w: stored tuple has %d elements, want 1", ErrCodec, len(t))
	}
	switch v := t[0].(type) {
	case []byte:
		return v, nil
	case string:
		return []byte(v), nil
	default:
		return nil, fmt.Errorf("%w: stored tuple element is %T, want bytes or string", ErrCodec, v)
	}
}

// Codec converts between a typed item and the bytes a queue stores. Encode
// and Decode must be inverse and safe for concurrent use. An Encode or
// Decode that panics counts as failing, with a *CodecError whose error
// says it panicked and with what: a write writes nothing, and a take
// returns the item's bytes in the *CodecError.
type Codec[T any] interface {
	Encode(v T) ([]byte, error)
	Decode(b []byte) (T, error)
}

// BytesCodec stores []byte items as they are.
type BytesCodec struct{}

// Encode returns v.
func (BytesCodec) Encode(v []byte) ([]byte, error) { return v, nil }

// Decode returns b.
func (BytesCodec) Decode(b []byte) ([]byte, error) { return b, nil }

// StringCodec stores strings as their UTF-8 bytes.
type StringCodec struct{}

// Encode returns the bytes of v.
func (StringCodec) Encode(v string) ([]byte, error) { return []byte(v), nil }

// Decode returns b as a string.
func (StringCodec) Decode(b []byte) (string, error) { return string(b), nil }

// JSONCodec stores items as JSON with encoding/json.
type JSONCodec[T any] struct{}

// Encode marshals v.
func (JSONCodec[T]) Encode(v T) ([]byte, error) { return json.Marshal(v) }

// Decode unmarshals b.
func (JSONCodec[T]) Decode(b []byte) (T, error) {
	var v T
	err := json.Unmarshal(b, &v)
	return v, err
}

// TupleCodec stores tuples packed with the tuple layer.
type TupleCodec struct{}

// Encode packs v.
func (TupleCodec) Encode(v tuple.Tuple) ([]byte, error) { return v.Pack() }

// Decode unpacks b.
func (TupleCodec) Decode(b []byte) (tuple.Tuple, error) { return tuple.Unpack(b) }

// Values the layers write besides items (journal records, staged results)
// hold an item's stored bytes as they are, next to a little metadata, so
// they can exceed FoundationDB's value limit by that much. Such a value is
// written in chunks of at most kv.MaxValueSize bytes: the first at the
// value's key, the i-th after it at key + pack((i,)). Every chunk key
// extends the first, so one range read of chunkRange(key) returns the whole
// value, and a range read over many such values returns each value's chunks
// together, in order (joinChunks).

// chunkRange is the range holding the chunks of the value at key.
func chunkRange(key []byte) kv.KeyRange {
	return kv.KeyRange{Begin: key, End: append(bytes.Clone(key), 0xff)}
}

// setChunked writes v at key, split into chunks of at most kv.MaxValueSize
// bytes. It does not clear chunks of an earlier, longer value at key: keys
// written with it are written once, or cleared with clearChunked first.
func setChunked(tr kv.Transaction, key, v []byte) {
	n := min(len(v), kv.MaxValueSize)
	tr.Set(key, v[:n])
	for i := int64(1); n < len(v); i++ {
		m := min(len(v)-n, kv.MaxValueSize)
		ck, _ := tuple.Tuple{i}.AppendPack(bytes.Clone(key))
		tr.Set(ck, v[n:n+m])
		n += m
	}
}

// clearChunked clears the value at key and all its chunks.
func clearChunked(tr kv.Transaction, key []byte) { tr.ClearRange(chunkRange(key)) }

// joinChunks joins the chunks in kvs (a range read, in key order) into the
// values they make, each at the key of its first chunk. A chunk whose first
// chunk is not in kvs (a read that began inside a value) is returned as a
// value of its own: a reader that can tell a whole value from a part (a
// length in its header) must do so.
func joinChunks(kvs []kv.KeyValue) []kv.KeyValue {
	out := make([]kv.KeyValue, 0, len(kvs))
	for _, p := range kvs {
		if n := len(out); n > 0 && len(p.Key) > len(out[n-1].Key) && bytes.HasPrefix(p.Key, out[n-1].Key) {
			out[n-1].Value = append(bytes.Clone(out[n-1].Value), p.Value...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// chunkedValue is a pending read of one chunked value.
type chunkedValue struct {
	tr  kv.ReadTransaction
	key []byte
	f   kv.FutureValue
}

// getChunked starts a normal read of the value at key. It reads the first
// chunk, a point read issued at once like any Get; only a first chunk of
// the full kv.MaxValueSize bytes can have chunks after it, and Get then
// reads them (a second round trip, for values that large only).
func getChunked(tr kv.ReadTransaction, key []byte) chunkedValue {
	return chunkedValue{tr: tr, key: key, f: tr.Get(key)}
}

// Get waits for the read and returns the value (nil when the key is
// absent).
func (c chunkedValue) Get() ([]byte, error) {
	v, err := c.f.Get()
	if err != nil || len(v) < kv.MaxValueSize {
		return v, err
	}
	rest := kv.KeyRange{Begin: append(bytes.Clone(c.key), 0x00), End: append(bytes.Clone(c.key), 0xff)}
	kvs, err := c.tr.GetRange(rest, kv.RangeOptions{Mode: kv.StreamingModeWantAll}).GetSlice()
	if err != nil {
		return nil, err
	}
	v = bytes.Clone(v)
	for _, p := range kvs {
		v = append(v, p.Value...)
	}
	return v, nil
}

// countChunks counts the pairs at the end of kvs that belong to the value
// at key (its first chunk and the chunks after it).
func countChunks(kvs []kv.KeyValue, key []byte) int {
	n := 0
	for i := len(kvs) - 1; i >= 0 && bytes.HasPrefix(kvs[i].Key, key); i-- {
		n++
	}
	return n
}
