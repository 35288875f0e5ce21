package fdbkv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/fdbkv"
	"github.com/fdbqueue/fdbqueue/kv"
)

// TestWrapTransactionOfTheZeroTransaction wraps the zero fdb.Transaction,
// which the binding's CreateTransaction returns with an error and whose
// every method panics: the wrapper answers with kv.ErrClientInvalidOp
// instead, and a layer operation joined to it fails and changes nothing.
// It calls no C function, so it runs against the stub libfdb_c too.
func TestWrapTransactionOfTheZeroTransaction(t *testing.T) {
	ctx := context.Background()
	tr := fdbkv.WrapTransaction(fdb.Transaction{})
	invalid := func(what string, err error) {
		t.Helper()
		var fe fdb.Error
		if !errors.Is(err, kv.ErrClientInvalidOp) || !errors.As(err, &fe) || fe.Code != 2000 {
			t.Errorf("%s: %v, want client_invalid_operation (2000) with an fdb.Error", what, err)
		}
	}
	k := []byte("k")
	r := kv.KeyRange{Begin: k, End: []byte("l")}
	_, err := tr.Get(k).Get()
	invalid("Get", err)
	_, err = tr.Snapshot().GetRange(r, kv.RangeOptions{}).GetSlice()
	invalid("Snapshot().GetRange", err)
	it := tr.GetRange(r, kv.RangeOptions{}).Iterator()
	if it.Next() {
		t.Error("the iterator of a failed range read has a row")
	}
	invalid("GetRange iterator", it.Err())
	_, err = tr.GetReadVersion().Get()
	invalid("GetReadVersion", err)
	tr.Set(k, k)
	tr.Add(k, k)
	tr.Clear(k)
	tr.ClearRange(r)
	tr.SetVersionstampedKey(k, k)
	invalid("AddReadConflictKey", tr.AddReadConflictKey(k))
	invalid("AddWriteConflictRange", tr.AddWriteConflictRange(r))
	invalid("Watch", tr.Watch(k).Wait(ctx))
	invalid("Commit", tr.Commit())
	invalid("OnError", tr.OnError(kv.ErrNotCommitted))
	_, err = tr.GetCommittedVersion()
	invalid("GetCommittedVersion", err)
	_, err = tr.GetVersionstamp().Get()
	invalid("GetVersionstamp", err)
	_, err = tr.GetApproximateSize().Get()
	invalid("GetApproximateSize", err)
	invalid("SetTimeout", tr.Options().SetTimeout(time.Second))
	tr.Reset()
	tr.Cancel()
	invalid("Transact", tr.Transact(ctx, func(kv.Transaction) error { return nil }))

	q, err := fdbqueue.NewQueue(fdbqueue.SubspaceFromBytes([]byte("q/")))
	if err != nil {
		t.Fatal(err)
	}
	invalid("Enqueue", q.Enqueue(ctx, tr, []byte("item")))
	_, err = q.Dequeue(ctx, tr)
	invalid("Dequeue", err)
}
