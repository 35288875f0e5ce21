package fdbkv

import (
	"context"
	"time"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue/kv"
)

// noHandle is what WrapTransaction returns for the zero fdb.Transaction,
// which fdb.Database.CreateTransaction returns with its error: it has no C
// handle, and every method of the binding's would panic on it. Every read,
// Commit and transactional call fails with client_invalid_operation (2000,
// an fdb.Error in its chain, which no retry loop retries), and writes do
// nothing, as a write's error surfaces later in FDB too.
type noHandle struct{}

var _ kv.Transaction = noHandle{}

// errNoHandle is the error of every call of noHandle.
var errNoHandle = translateError(fdb.Error{Code: kv.ErrClientInvalidOp.Code})

type noValue struct{}

func (noValue) Get() ([]byte, error) { return nil, errNoHandle }

type noInt64 struct{}

func (noInt64) Get() (int64, error) { return 0, errNoHandle }

type noWatch struct{}

func (noWatch) Wait(context.Context) error { return errNoHandle }
func (noWatch) Cancel()                    {}

type noOptions struct{}

func (noOptions) SetTimeout(time.Duration) error       { return errNoHandle }
func (noOptions) SetRetryLimit(int) error              { return errNoHandle }
func (noOptions) SetMaxRetryDelay(time.Duration) error { return errNoHandle }

func (noHandle) Get([]byte) kv.FutureValue { return noValue{} }
func (noHandle) GetRange(kv.KeyRange, kv.RangeOptions) kv.RangeResult {
	return failedRange{err: errNoHandle}
}
func (noHandle) GetReadVersion() kv.FutureInt64 { return noInt64{} }
func (t noHandle) Snapshot() kv.ReadTransaction { return t }
func (noHandle) ReadTransact(context.Context, func(kv.ReadTransaction) error) error {
	return errNoHandle
}
func (noHandle) Transact(context.Context, func(kv.Transaction) error) error { return errNoHandle }
func (noHandle) Set(_, _ []byte)                                            {}
func (noHandle) Clear([]byte)                                               {}
func (noHandle) ClearRange(kv.KeyRange)                                     {}
func (noHandle) Add(_, _ []byte)                                            {}
func (noHandle) Max(_, _ []byte)                                            {}
func (noHandle) Min(_, _ []byte)                                            {}
func (noHandle) BitAnd(_, _ []byte)                                         {}
func (noHandle) BitOr(_, _ []byte)                                          {}
func (noHandle) BitXor(_, _ []byte)                                         {}
func (noHandle) ByteMin(_, _ []byte)                                        {}
func (noHandle) ByteMax(_, _ []byte)                                        {}
func (noHandle) AppendIfFits(_, _ []byte)                                   {}
func (noHandle) CompareAndClear(_, _ []byte)                                {}
func (noHandle) SetVersionstampedKey(_, _ []byte)                           {}
func (noHandle) SetVersionstampedValue(_, _ []byte)                         {}
func (noHandle) AddReadConflictRange(kv.KeyRange) error                     { return errNoHandle }
func (noHandle) AddReadConflictKey([]byte) error                            { return errNoHandle }
func (noHandle) AddWriteConflictRange(kv.KeyRange) error                    { return errNoHandle }
func (noHandle) AddWriteConflictKey([]byte) error                           { return errNoHandle }
func (noHandle) Watch([]byte) kv.Watch                                      { return noWatch{} }
func (noHandle) Commit() error                                              { return errNoHandle }
func (noHandle) OnError(err error) error                                    { return noHandleOnError(err) }
func (noHandle) Reset()                                                     {}
func (noHandle) Cancel()                                                    {}
func (noHandle) GetCommittedVersion() (int64, error)                        { return 0, errNoHandle }
func (noHandle) GetVersionstamp() kv.FutureVersionstamp                     { return noValue{} }
func (noHandle) GetApproximateSize() kv.FutureInt64                         { return noInt64{} }
func (noHandle) Options() kv.TransactionOptions                             { return noOptions{} }

// noHandleOnError is OnError of a transaction without a handle: an error
// without an FDB code comes back unchanged, as kv.Transaction.OnError
// promises (kv.RetryLoop then returns the function's own error); any
// other fails with errNoHandle.
func noHandleOnError(err error) error {
	if _, ok := errorCode(err); !ok {
		return err
	}
	return errNoHandle
}
