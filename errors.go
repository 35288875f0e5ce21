package fdbqueue

import (
	"errors"
	"fmt"
)

// Errors returned by the layers. Test them with errors.Is; errors from the
// database itself are kv errors (kv.ErrNotCommitted, ...) and pass through
// wrapped, so errors.Is works on them too.
var (
	// ErrEmpty is returned by Dequeue, Pop*, Peek* and batch forms when the
	// queue holds no item.
	ErrEmpty = errors.New("fdbqueue: queue is empty")

	// ErrValueTooLarge is returned, before anything is written, for a value
	// whose stored form exceeds FoundationDB's 100,000-byte value limit. The
	// error also matches kv.ErrValueTooLarge.
	ErrValueTooLarge = errors.New("fdbqueue: value too large")

	// ErrForeignKey is returned when a key inside a queue's subspace does not
	// have the layout the queue writes (another program wrote there, or two
	// queue kinds share a subspace). The error is a *ForeignKeyError naming
	// the key. Nothing is removed.
	ErrForeignKey = errors.New("fdbqueue: key in the queue's subspace is not a queue item")

	// ErrKeyOutsideSubspace is returned by Subspace.Unpack for a key that does
	// not start with the subspace's prefix.
	ErrKeyOutsideSubspace = errors.New("fdbqueue: key is outside the subspace")

	// ErrMalformedKey is returned by Subspace.Unpack for a key with the right
	// prefix whose remainder is not a valid packed tuple.
	ErrMalformedKey = errors.New("fdbqueue: malformed key")

	// ErrInvalidArgument is returned for arguments that can never work: a nil
	// transactor, an empty subspace prefix for a queue, a batch size below 1,
	// a nil or zero Queue, PriorityQueue or JobQueue (not made by its
	// constructor).
	ErrInvalidArgument = errors.New("fdbqueue: invalid argument")

	// ErrBatchTooLarge is returned, before anything is written, when a batch
	// would exceed the per-transaction budget (see WithBatchBudget). Split
	// the batch.
	ErrBatchTooLarge = errors.New("fdbqueue: batch exceeds the transaction budget")

	// ErrTooManyToCount is returned by Len given a transaction when the
	// queue holds more than LenChunk keys: given a Database, Len counts
	// any number in several transactions.
	ErrTooManyToCount = errors.New("fdbqueue: too many items to count in one transaction")

	// ErrOperationExpired is returned when an operation is still retrying
	// after its journal retention: its record may have been collected, so it
	// can no longer tell whether an earlier attempt committed. The operation
	// may have taken effect (in an earlier attempt, or an earlier call with
	// the same WithOpID): treat it as maybe committed, although
	// kv.MaybeCommitted reports false for it unless one of this call's own
	// attempts had an unknown outcome. (A staged dequeue or pop that returns
	// it has already put back the item of a take whose record its cleanup
	// found; when it found none while a take was in doubt, kv.MaybeCommitted
	// reports true.)
	ErrOperationExpired = errors.New("fdbqueue: operation outlived its journal retention")

	// ErrClaimExpired is returned by a staged dequeue or pop whose request,
	// or the item handed to it, expired before the call could take it: the
	// call stopped renewing its request for StagingConfig.ClaimTimeout (a
	// stalled process, a long pause), and another consumer or Recover
	// returned the item due to it to the queue. The call took nothing; call
	// again. (Going on with a new request instead would not be
	// linearizable: the item went back to the queue during this call.) A
	// plain staged Dequeue whose withdrawal's commit had an unknown outcome
	// after two thirds of the claim timeout, and whose request is then
	// gone, cannot tell its own withdrawal from an expiry, and returns it
	// too. Under WithOpID the call commits a write conflict on the ID's
	// record key first, so that an earlier call's take still in flight
	// fails rather than taking an item after this answer.
	ErrClaimExpired = errors.New("fdbqueue: staged request expired before it was claimed")

	// ErrUnreadableAfterEnqueue is returned by Dequeue, DequeueBatch, Peek,
	// Empty and Len of a Queue made WithVersionstampOrder when they run in a
	// transaction that already enqueued to it and their read reaches the
	// new items: the keys of the items it enqueued are known only at
	// commit, and FoundationDB fails every read that may reach them with
	// accessed_unreadable (1036). (A read that stops at an item enqueued
	// before the transaction's read version succeeds; on a queue holding
	// only the new items every read fails.) The error also matches that kv
	// error (kv.Error{Code: 1036}). It cannot succeed on a retry: read
	// before you enqueue, or in another transaction.
	ErrUnreadableAfterEnqueue = errors.New("fdbqueue: versionstamp-ordered queue read after an enqueue in the same transaction")

	// ErrLeaseLost is returned by JobQueue.Ack, Nack, Extend and Release
	// when the job no longer carries the lease: the lease expired and
	// another consumer leased the job again, or the job was acked, nacked,
	// released, dead-lettered or cancelled since. Nothing is written.
	ErrLeaseLost = errors.New("fdbqueue: lease lost: the job was leased again or is gone")

	// ErrJobNotFound is returned by the JobQueue calls that take a job ID
	// when no job of the kind they act on has it: by Job when the queue
	// holds no job with the ID (never added, or acked, cancelled or
	// deleted since); by Cancel when no job in the queue (due, delayed or
	// leased) has it, a dead one included; by Requeue and DeleteDead when
	// no dead job has it. The message names the ID and what was looked
	// for.
	ErrJobNotFound = errors.New("fdbqueue: job not found")

	// ErrScheduleNotFound is returned by JobQueue.Unschedule when the
	// queue holds no marker of the schedule's name: never scheduled (no
	// Schedule of it has committed), or unscheduled already.
	ErrScheduleNotFound = errors.New("fdbqueue: schedule not found")

	// ErrUniqueKeyHeld is returned by JobQueue.Requeue when the dead job's
	// unique key is held by another job in the queue: the dead job stays
	// dead.
	ErrUniqueKeyHeld = errors.New("fdbqueue: unique key held by another job")

	// ErrCodec is returned when a typed queue's codec cannot encode or decode
	// a value, in a *CodecError: an item it failed to decode has been
	// dequeued all the same (unless peeked), and its bytes are in the error
	// (a TypedJobQueue's job stays leased, its lease in the error; one
	// TypedJobQueue.Job found is untouched, its JobInfo in the error).
	// It is also returned, not as a *CodecError, for a stored value that is
	// not a packed tuple under TupleValues: then nothing is removed.
	ErrCodec = errors.New("fdbqueue: codec error")
)

// ForeignKeyError describes a key in a queue's subspace that the queue did
// not write. It matches ErrForeignKey with errors.Is.
type ForeignKeyError struct {
	Key    []byte // the offending key, in full
	Reason string // why it is not a queue item
}

// Error describes the key and why it is not a queue item.
func (e *ForeignKeyError) Error() string {
	return fmt.Sprintf("fdbqueue: key %q in the queue's subspace is not a queue item: %s", e.Key, e.Reason)
}

// Is reports whether target is ErrForeignKey.
func (e *ForeignKeyError) Is(target error) bool { return target == ErrForeignKey }

// CodecError carries the raw bytes a typed queue failed to decode, and a
// TypedPriorityQueue's item's priority, so an item whose dequeue committed
// is never lost to a bad codec. It matches ErrCodec with errors.Is.
type CodecError struct {
	Raw []byte // the stored value (nil when encoding failed)
	Err error  // the codec's error
	// Priority is the item's priority, for a TypedPriorityQueue's item
	// (popped, peeked, or not encoded by Push or PushBatch) or a
	// TypedJobQueue's job; 0 for a TypedQueue's.
	Priority int64
	// Lease is the lease of a TypedJobQueue's job whose value did not
	// decode: still held, to Nack or Release with; nil otherwise.
	Lease *Lease
	// Job is the job, as TypedJobQueue.Job found it, whose value did not
	// decode; nil otherwise.
	Job *JobInfo
}

// Error describes the codec's failure.
func (e *CodecError) Error() string { return fmt.Sprintf("fdbqueue: codec: %v", e.Err) }

// Is reports whether target is ErrCodec.
func (e *CodecError) Is(target error) bool { return target == ErrCodec }

// Unwrap returns the codec's error.
func (e *CodecError) Unwrap() error { return e.Err }
