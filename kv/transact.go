package kv

import (
	"context"
	"errors"
	"fmt"
)

// Transact runs fn through t and returns fn's result, so that transactional
// functions can return typed values instead of interface{}. When t is a
// Database, fn may run several times (it is retried); the result of the run
// that committed is returned.
func Transact[T any](ctx context.Context, t Transactor, fn func(Transaction) (T, error)) (T, error) {
	var result T
	err := t.Transact(ctx, func(tr Transaction) error {
		r, err := fn(tr)
		if err != nil {
			return err
		}
		result = r
		return nil
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return result, nil
}

// ReadTransact is Transact for read-only functions.
func ReadTransact[T any](ctx context.Context, t ReadTransactor, fn func(ReadTransaction) (T, error)) (T, error) {
	var result T
	err := t.ReadTransact(ctx, func(tr ReadTransaction) error {
		r, err := fn(tr)
		if err != nil {
			return err
		}
		result = r
		return nil
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return result, nil
}

// RetryCreated runs fn with RetryLoop over a transaction of
// db.CreateTransaction, bound to a context that ends when RetryCreated
// returns, so that the backend releases it. It is the Transact of a
// Database that wraps another to change how its transactions are made (a
// default option, a wrapped transaction) and retries as every backend
// does. A nil ctx is context.Background().
func RetryCreated(ctx context.Context, db Database, fn func(Transaction) error) error {
	ctx, tr, cancel, err := createBound(ctx, db)
	if err != nil {
		return err
	}
	defer cancel()
	return RetryLoop(ctx, tr, fn)
}

// ReadRetryCreated is RetryCreated for reads (ReadRetryLoop).
func ReadRetryCreated(ctx context.Context, db Database, fn func(ReadTransaction) error) error {
	ctx, tr, cancel, err := createBound(ctx, db)
	if err != nil {
		return err
	}
	defer cancel()
	return ReadRetryLoop(ctx, tr, fn)
}

// createBound returns ctx (context.Background() if nil) and a transaction
// of db bound to a child of ctx, which cancel ends.
func createBound(ctx context.Context, db Database) (context.Context, Transaction, context.CancelFunc, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	tctx, cancel := context.WithCancel(ctx)
	tr, err := db.CreateTransaction(tctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, tr, cancel, nil
}

// RetryLoop is the standard retry loop, shared by every backend's
// Database.Transact: run fn, commit, and on error ask tr.OnError whether to
// run again (OnError backs off and resets the transaction). Backends call
// it with a transaction created for ctx; they never retry on their own.
//
// It stops when ctx ends, returning an error that matches both ctx.Err() and
// the last transaction error. Under ErrCommitUnknownResult it retries, as
// FDB's loop does: fn must be idempotent or detect its earlier success. When
// the loop ends in an error after an attempt whose commit outcome was
// unknown, the error satisfies MaybeCommitted, whatever stopped the loop.
func RetryLoop(ctx context.Context, tr Transaction, fn func(Transaction) error) error {
	uncertain := false // an earlier attempt's commit may have been applied
	for {
		err := fn(tr)
		if err == nil {
			if err = tr.Commit(); err == nil {
				return nil
			}
			uncertain = uncertain || MaybeCommitted(err)
		}
		if err = retryOrStop(ctx, tr, err); err != nil {
			if uncertain && !MaybeCommitted(err) {
				// The loop stops on another error (the context ended, the
				// retry limit, fn's own error), but an earlier commit may
				// still have been applied: say so.
				err = fmt.Errorf("%w (%w)", err, errEarlierAttemptUncertain)
			}
			return err
		}
	}
}

// ReadRetryLoop is RetryLoop for read-only functions: nothing is committed.
func ReadRetryLoop(ctx context.Context, tr Transaction, fn func(ReadTransaction) error) error {
	for {
		err := fn(tr)
		if err == nil {
			return nil
		}
		if err = retryOrStop(ctx, tr, err); err != nil {
			return err
		}
	}
}

// retryOrStop returns nil when the loop should run again, or the error to
// return to the caller.
func retryOrStop(ctx context.Context, tr Transaction, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		tr.Cancel()
		return withContext(cerr, err)
	}
	if oerr := tr.OnError(err); oerr != nil {
		if cerr := ctx.Err(); cerr != nil {
			return withContext(cerr, oerr)
		}
		return oerr
	}
	return nil
}

// withContext makes err also match the context's error.
func withContext(cerr, err error) error {
	if errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w (last transaction error: %w)", cerr, err)
}
