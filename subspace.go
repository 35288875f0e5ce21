package fdbqueue

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Subspace is a key prefix plus tuple packing: the keys of a subspace are its
// prefix followed by a packed tuple. It is FDB's subspace layer; a Subspace
// is an immutable value, safe to copy and share.
type Subspace struct {
	prefix []byte
}

// NewSubspace returns the subspace whose prefix is t packed, e.g.
// NewSubspace(tuple.Tuple{"app", "jobs"}).
func NewSubspace(t tuple.Tuple) (Subspace, error) {
	p, err := t.Pack()
	if err != nil {
		return Subspace{}, fmt.Errorf("fdbqueue: subspace prefix: %w", err)
	}
	return Subspace{prefix: p}, nil
}

// SubspaceFromBytes returns the subspace with a raw prefix, such as one
// allocated by FDB's directory layer (DirectorySubspace.Bytes()).
func SubspaceFromBytes(prefix []byte) Subspace {
	return Subspace{prefix: bytes.Clone(prefix)}
}

// Bytes returns a copy of the subspace's prefix.
func (s Subspace) Bytes() []byte { return bytes.Clone(s.prefix) }

// Sub returns the subspace nested under s by the tuple of elems.
func (s Subspace) Sub(elems ...any) (Subspace, error) {
	p, err := tuple.Tuple(elems).AppendPack(bytes.Clone(s.prefix))
	if err != nil {
		return Subspace{}, fmt.Errorf("fdbqueue: subspace: %w", err)
	}
	return Subspace{prefix: p}, nil
}

// Pack returns the key for t in s: the prefix followed by t packed.
func (s Subspace) Pack(t tuple.Tuple) ([]byte, error) {
	buf := make([]byte, len(s.prefix), len(s.prefix)+32)
	copy(buf, s.prefix)
	return t.AppendPack(buf)
}

// Unpack returns the tuple that key packs within s. A key without s's prefix
// gives ErrKeyOutsideSubspace; a remainder that is not a packed tuple gives
// ErrMalformedKey (wrapping the tuple error).
func (s Subspace) Unpack(key []byte) (tuple.Tuple, error) {
	if !bytes.HasPrefix(key, s.prefix) {
		return nil, fmt.Errorf("%w: %q", ErrKeyOutsideSubspace, key)
	}
	t, err := tuple.Unpack(key[len(s.prefix):])
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrMalformedKey, key, err)
	}
	return t, nil
}

// Range returns the range of every key that packs a tuple within s (with
// elems, of every key that packs a tuple starting with elems): from
// prefix+\x00, included (it packs the tuple (nil,)), to prefix+\xff,
// excluded, as FDB's subspace layer (Subspace.FDBRangeKeys in the Go
// binding) ranges.
func (s Subspace) Range(elems ...any) (kv.KeyRange, error) {
	// Both bounds in one buffer: prefix and elems, \x00, then the same
	// again and \xff (a second allocation only for long elems).
	b := append(make([]byte, 0, 2*(len(s.prefix)+24)), s.prefix...)
	if len(elems) > 0 {
		var err error
		if b, err = tuple.Tuple(elems).AppendPack(b); err != nil {
			return kv.KeyRange{}, fmt.Errorf("fdbqueue: subspace range: %w", err)
		}
	}
	n := len(b)
	b = slices.Grow(b, n+2)
	b = append(b, 0x00)
	b = append(b, b[:n]...)
	b = append(b, 0xff)
	return kv.KeyRange{Begin: b[: n+1 : n+1], End: b[n+1:]}, nil
}

// Contains reports whether key starts with s's prefix.
func (s Subspace) Contains(key []byte) bool { return bytes.HasPrefix(key, s.prefix) }

// String shows the prefix in FDB's printable form.
func (s Subspace) String() string { return fmt.Sprintf("Subspace(%q)", s.prefix) }
