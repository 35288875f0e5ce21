package fdbqueue

import "fmt"

// A handle (Queue, PriorityQueue, JobQueue, Task) is made by its
// constructor, or by the pool for a Task. A nil or zero one fails every
// operation with one of these, before it reads or writes anything; its
// accessors return zero values. Each is a single check of a pointer, made
// once per operation.
var (
	errZeroQueue         = fmt.Errorf("%w: nil or zero Queue: make one with NewQueue", ErrInvalidArgument)
	errZeroPriorityQueue = fmt.Errorf("%w: nil or zero PriorityQueue: make one with NewPriorityQueue", ErrInvalidArgument)
	errZeroJobQueue      = fmt.Errorf("%w: nil or zero JobQueue: make one with NewJobQueue", ErrInvalidArgument)
	errZeroTask          = fmt.Errorf("%w: nil or zero Task: a Task is handed to a Handler by JobQueue.Run", ErrInvalidArgument)
)

// usable returns nil for a Queue made by NewQueue, errZeroQueue for a nil
// or zero one (every constructor sets the journal).
func (q *Queue) usable() error {
	if q == nil || q.journal == nil {
		return errZeroQueue
	}
	return nil
}

// usable is Queue.usable for a PriorityQueue.
func (pq *PriorityQueue) usable() error {
	if pq == nil || pq.journal == nil {
		return errZeroPriorityQueue
	}
	return nil
}

// usable is Queue.usable for a JobQueue.
func (q *JobQueue) usable() error {
	if q == nil || q.journal == nil {
		return errZeroJobQueue
	}
	return nil
}
