package fdbqueue

import (
	"encoding/json"
	"fmt"

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
// and Decode must be inverse and safe for concurrent use.
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
