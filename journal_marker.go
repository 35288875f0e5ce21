package fdbqueue

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// The marker of an operation whose ID its caller chose (WithOpID): record
// writes it beside the records, at (shard, id, -1), with
// SetVersionstampedValue, and check reads it. Its value is the operation's
// kind and the commit's versionstamp.
//
// It catches an ID given to a second call. In the transaction that wrote
// it, the marker cannot be read: FoundationDB's read-your-writes layer
// fails a read of a key set with SetVersionstampedValue with
// accessed_unreadable (RYWIterator::kv and ::type,
// fdbclient/RYWIterator.cpp), snapshot reads too, and a failed read fails
// that transaction's commit. So a second call under the ID in the same
// transaction, which would otherwise take the first call's record for its
// own and do nothing, fails with ErrInvalidArgument, and the transaction
// with it. Once committed, the marker names the kind of operation the ID
// was given to: a call of another kind under it fails the same way. Only a
// retry of the same call, in a later transaction, gets past it.

// markerKey returns the operation's marker key.
func (o *op) markerKey() []byte {
	k, _ := tuple.Tuple{o.shard(), o.id[:], int64(-1)}.AppendPack(bytes.Clone(o.j.prefix))
	return k
}

// markerValue is the marker's value for SetVersionstampedValue: the kind
// (its first maxMarkerKind bytes), the 10 bytes the versionstamp replaces,
// and their offset.
func (o *op) markerValue() []byte {
	kind := o.markerKind()
	v := make([]byte, 0, len(kind)+14)
	v = append(v, kind...)
	v = append(v, make([]byte, 10)...)
	return binary.LittleEndian.AppendUint32(v, uint32(len(kind)))
}

// maxMarkerKind bounds the kind a marker holds (the budget counts it).
const maxMarkerKind = 16

// The journal kinds of a PriorityQueue's pops (op.mark). The metrics count
// PopMin and PopMax as one kind, "pop", but the record of one, the
// smallest or the largest item, is no result of the other: under one ID,
// a call of the other must fail, not return the first one's item.
const (
	markPopMin = "pop min"
	markPopMax = "pop max"
)

// popMark is the journal kind of a PopMin (max false) or PopMax, batch,
// Wait and staged forms included.
func popMark(max bool) string {
	if max {
		return markPopMax
	}
	return markPopMin
}

// journalKind is the kind the marker names and a remembered slot is
// resumed for: the mark, else the metrics' kind.
func (o *op) journalKind() string {
	if o.mark != "" {
		return o.mark
	}
	return o.kind
}

func (o *op) markerKind() string { k := o.journalKind(); return k[:min(len(k), maxMarkerKind)] }

// namesKind reports whether a marker's kind k is o's. A marker written by
// an earlier version of this package names a pop "pop", PopMin and PopMax
// alike: it is taken for either, so that a retry across an upgrade still
// finds its record.
func (o *op) namesKind(k string) bool {
	return k == o.markerKind() || o.mark != "" && k == o.kind
}

// checkMarker is the verdict on the marker read (see markerKey): nil if
// the ID may be this operation's.
func (o *op) checkMarker(v []byte, err error) error {
	switch {
	case errors.Is(err, kv.ErrAccessedUnreadable):
		return fmt.Errorf("%w: op %s was already given to an operation in this transaction (an OpID names one operation call)", ErrInvalidArgument, o.id)
	case err != nil:
		return err
	case len(v) > 10 && o.kind != "" && !o.namesKind(string(v[:len(v)-10])):
		// (A marker or an operation without a kind is not compared.)
		return fmt.Errorf("%w: op %s was given to a %q operation, not %q (an OpID names one operation call)", ErrInvalidArgument, o.id, v[:len(v)-10], o.journalKind())
	}
	return nil
}
