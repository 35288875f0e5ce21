package fdbqueue

import (
	"errors"
	"fmt"

	"github.com/fdbqueue/fdbqueue/kv"
)

// UnknownResultError is the error of an operation that may or may not have
// taken effect and can be settled: it ran with the journal (its queue was
// not made WithoutIdempotency) and failed with an error for which
// kv.MaybeCommitted is true, typically because its context ended after a
// commit_unknown_result. ID is the operation's ID, the one it was given
// with WithOpID or made itself: call the operation again with
// WithOpID(ID) within the journal retention to settle it (a Wait form: its
// form that does not wait; for an ID the operation made, on the same
// Queue, PriorityQueue or JobQueue value: see WithOpID). A Lease may be
// settled with SettleLease(ID) instead.
//
// Unwrap returns Err, so errors.Is, errors.As and kv.MaybeCommitted see the
// error as before. An operation without the journal never returns one (a
// call under an ID would apply it anew), nor does one that failed with
// ErrEmpty (it took nothing) or ErrOperationExpired (its ID can no longer
// settle it).
//
// Op names the operation as the fdbqueue.op attribute of the metrics and
// the op field of the queue's log lines do (see WithMeterProvider):
// enqueue, dequeue, push, pop (PopMin and PopMax alike, in every form),
// add, lease, ack, nack, release, requeue, delete_dead, cancel or
// unschedule.
type UnknownResultError struct {
	Op  string // the operation's name, as the metrics and logs give it ("enqueue", "pop", "delete_dead", ...)
	ID  OpID   // the ID to call the operation again under
	Err error  // the operation's error
}

// Error describes the operation, its ID and its error.
func (e *UnknownResultError) Error() string {
	return fmt.Sprintf("fdbqueue: %s may have committed; call it again with WithOpID(%s) to settle it: %v", e.Op, e.ID, e.Err)
}

// Unwrap returns the operation's error.
func (e *UnknownResultError) Unwrap() error { return e.Err }

// unknownResult returns err as an *UnknownResultError carrying o's ID when
// a call under that ID can settle o (see UnknownResultError), else err.
func (o *op) unknownResult(err error) error {
	if err == nil || o.off() || !kv.MaybeCommitted(err) ||
		errors.Is(err, ErrEmpty) || errors.Is(err, ErrOperationExpired) {
		return err
	}
	// o.kind, the metrics' and logs' name: the journal's kind
	// (journalKind) tells PopMin from PopMax, which no caller needs to be
	// told, and would name one operation two ways.
	return &UnknownResultError{Op: o.kind, ID: o.id, Err: err}
}
