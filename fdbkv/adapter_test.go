package fdbkv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue/fdbkv"
	"github.com/fdbqueue/fdbqueue/kv"
)

// These tests cover what is particular to the adapter (the conformance
// suite covers kv's semantics): joining the application's own fdb
// transaction, context cancellation, error translation on real errors,
// watches, options and Open's sharing. They need a cluster.

func key(prefix []byte, s string) []byte {
	return append(bytes.Clone(prefix), s...)
}

func TestRoundTripAndCommitInfo(t *testing.T) {
	db := testDatabase(t)
	prefix := testPrefix(t, db)
	ctx := testContext(t)

	tr, err := db.CreateTransaction(ctx)
	if err != nil {
		t.Fatalf("CreateTransaction: %v", err)
	}
	// "vs/", 10 placeholder bytes, then their offset as 4 little-endian bytes.
	vsKey := key(prefix, "vs/")
	offset := len(vsKey)
	vsKey = append(vsKey, make([]byte, 10)...)
	vsKey = append(vsKey, byte(offset), byte(offset>>8), byte(offset>>16), byte(offset>>24))
	tr.Set(key(prefix, "a"), []byte("1"))
	tr.Set(key(prefix, "b"), []byte{})
	tr.SetVersionstampedKey(vsKey, []byte("x"))
	vs := tr.GetVersionstamp()
	if err := tr.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	version, err := tr.GetCommittedVersion()
	if err != nil || version <= 0 {
		t.Fatalf("GetCommittedVersion = %d, %v; want a positive version", version, err)
	}
	stamp, err := vs.Get()
	if err != nil || len(stamp) != 10 {
		t.Fatalf("GetVersionstamp = %x, %v; want 10 bytes", stamp, err)
	}

	err = db.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
		if v, err := tr.Get(key(prefix, "a")).Get(); err != nil || string(v) != "1" {
			t.Errorf("Get(a) = %q, %v; want \"1\"", v, err)
		}
		if v, err := tr.Get(key(prefix, "b")).Get(); err != nil || v == nil || len(v) != 0 {
			t.Errorf("Get(b) = %#v, %v; want a non-nil empty value", v, err)
		}
		if v, err := tr.Snapshot().Get(key(prefix, "missing")).Get(); err != nil || v != nil {
			t.Errorf("Get(missing) = %#v, %v; want nil, nil", v, err)
		}
		want := append(key(prefix, "vs/"), stamp...)
		kvs, err := tr.GetRange(kv.KeyRange{Begin: key(prefix, "vs/"), End: key(prefix, "vs0")}, kv.RangeOptions{}).GetSlice()
		if err != nil || len(kvs) != 1 || !bytes.Equal(kvs[0].Key, want) {
			t.Errorf("versionstamped key: read %v, %v; want one key %q", kvs, err, want)
		}
		it := tr.GetRange(kv.KeyRange{Begin: prefix, End: key(prefix, "\xff")}, kv.RangeOptions{Reverse: true, Limit: 2}).Iterator()
		var got []string
		for it.Next() {
			got = append(got, string(it.KeyValue().Key[len(prefix):]))
		}
		if err := it.Err(); err != nil || len(got) != 2 || got[1] != "b" {
			t.Errorf("reverse iterator with limit 2 gave %q, %v; want [vs/<stamp> b]", got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ReadTransact: %v", err)
	}
}

func TestWrapTransactionJoinsTheApplicationsTransaction(t *testing.T) {
	db := testDatabase(t)
	prefix := testPrefix(t, db)
	ctx := testContext(t)

	// A "layer" function: takes a Transactor, calls Transact.
	layerWrite := func(tor kv.Transactor, k []byte) error {
		return tor.Transact(ctx, func(tr kv.Transaction) error {
			tr.Set(k, []byte("layer"))
			return nil
		})
	}
	_, err := db.FDB().Transact(func(tr fdb.Transaction) (any, error) {
		tr.Set(fdb.Key(key(prefix, "app")), []byte("app"))
		if err := layerWrite(fdbkv.WrapTransaction(tr), key(prefix, "layer")); err != nil {
			return nil, err
		}
		// The layer's write is visible inside the application's transaction
		// before the commit: it was made in that transaction.
		v, err := tr.Get(fdb.Key(key(prefix, "layer"))).Get()
		if err != nil {
			return nil, err
		}
		if string(v) != "layer" {
			t.Errorf("inside the application's transaction the layer's key reads %q, want \"layer\"", v)
		}
		return nil, nil
	})
	if err != nil {
		t.Fatalf("the application's fdb Transact: %v", err)
	}
	err = db.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
		for _, k := range []string{"app", "layer"} {
			if v, err := tr.Get(key(prefix, k)).Get(); err != nil || string(v) != k {
				t.Errorf("after the commit %s = %q, %v; want %q", k, v, err, k)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ReadTransact: %v", err)
	}
}

func TestConflictTranslatesAndRetries(t *testing.T) {
	db := testDatabase(t)
	prefix := testPrefix(t, db)
	ctx := testContext(t)
	k := key(prefix, "k")

	tr1, err := db.CreateTransaction(ctx)
	if err != nil {
		t.Fatalf("CreateTransaction: %v", err)
	}
	if _, err := tr1.Get(k).Get(); err != nil {
		t.Fatalf("tr1 Get: %v", err)
	}
	if err := db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(k, []byte("other")); return nil }); err != nil {
		t.Fatalf("the interfering write: %v", err)
	}
	tr1.Set(k, []byte("mine"))
	err = tr1.Commit()
	var ke kv.Error
	if !errors.Is(err, kv.ErrNotCommitted) || !errors.As(err, &ke) || ke.Code != 1020 {
		t.Fatalf("commit after a conflicting write = %v, want not_committed (1020)", err)
	}
	var fe fdb.Error
	if !errors.As(err, &fe) || fe.Code != 1020 {
		t.Errorf("the translated error does not unwrap to fdb.Error{1020}: %v", err)
	}
	if err := tr1.OnError(err); err != nil {
		t.Fatalf("OnError(not_committed) = %v, want nil (retry)", err)
	}
	tr1.Set(k, []byte("mine"))
	if err := tr1.Commit(); err != nil {
		t.Fatalf("commit after OnError reset the transaction: %v", err)
	}

	// An application error is not retried and comes back as it is.
	appErr := errors.New("application error")
	runs := 0
	err = db.Transact(ctx, func(tr kv.Transaction) error { runs++; return appErr })
	if err != appErr || runs != 1 {
		t.Errorf("Transact with a failing function = %v after %d runs, want the function's error after 1 run", err, runs)
	}
}

func TestContextCancelsTransaction(t *testing.T) {
	db := testDatabase(t)
	prefix := testPrefix(t, db)
	ctx, cancel := context.WithCancel(testContext(t))

	runs := 0
	err := db.Transact(ctx, func(tr kv.Transaction) error {
		runs++
		cancel()
		// The cancellation reaches the transaction asynchronously.
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := tr.Get(key(prefix, "k")).Get(); err != nil {
				return err
			}
			time.Sleep(10 * time.Millisecond)
		}
		return errors.New("the transaction was not cancelled within 10s of its context")
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, kv.ErrTransactionCancelled) {
		t.Errorf("Transact whose context was cancelled = %v, want an error matching context.Canceled and transaction_cancelled", err)
	}
	if runs != 1 {
		t.Errorf("the function ran %d times, want 1", runs)
	}
	if _, err := db.CreateTransaction(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("CreateTransaction with an ended context = %v, want context.Canceled", err)
	}
}

func TestTimeoutOption(t *testing.T) {
	db := testDatabase(t)
	prefix := testPrefix(t, db)
	ctx := testContext(t)

	tr, err := db.CreateTransaction(ctx)
	if err != nil {
		t.Fatalf("CreateTransaction: %v", err)
	}
	if err := tr.Options().SetTimeout(time.Millisecond); err != nil {
		t.Fatalf("SetTimeout: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	_, err = tr.Get(key(prefix, "k")).Get()
	if !errors.Is(err, kv.ErrTransactionTimedOut) {
		t.Fatalf("a read after the timeout = %v, want transaction_timed_out (1031)", err)
	}
	if oerr := tr.OnError(err); !errors.Is(oerr, kv.ErrTransactionTimedOut) {
		t.Errorf("OnError(transaction_timed_out) = %v, want the same error (not retryable)", oerr)
	}

	// The other options are accepted, and a retry limit of 0 makes OnError
	// give up on a retryable error.
	tr2, err := db.CreateTransaction(ctx)
	if err != nil {
		t.Fatalf("CreateTransaction: %v", err)
	}
	if err := tr2.Options().SetMaxRetryDelay(100 * time.Millisecond); err != nil {
		t.Errorf("SetMaxRetryDelay: %v", err)
	}
	if err := tr2.Options().SetRetryLimit(0); err != nil {
		t.Fatalf("SetRetryLimit(0): %v", err)
	}
	if oerr := tr2.OnError(kv.ErrNotCommitted); !errors.Is(oerr, kv.ErrNotCommitted) {
		t.Errorf("OnError(not_committed) with retry limit 0 = %v, want not_committed back", oerr)
	}
}

func TestWatch(t *testing.T) {
	db := testDatabase(t)
	prefix := testPrefix(t, db)
	ctx := testContext(t)
	k := key(prefix, "watched")

	var w kv.Watch
	if err := db.Transact(ctx, func(tr kv.Transaction) error {
		w = tr.Watch(k)
		return nil
	}); err != nil {
		t.Fatalf("registering a watch: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := w.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait before any change = %v, want context.DeadlineExceeded", err)
	}
	if err := db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(k, []byte("changed")); return nil }); err != nil {
		t.Fatalf("changing the watched key: %v", err)
	}
	if err := w.Wait(ctx); err != nil {
		t.Errorf("Wait after the key changed = %v, want nil", err)
	}

	var w2 kv.Watch
	if err := db.Transact(ctx, func(tr kv.Transaction) error {
		w2 = tr.Watch(k)
		return nil
	}); err != nil {
		t.Fatalf("registering a second watch: %v", err)
	}
	w2.Cancel()
	if err := w2.Wait(ctx); !errors.Is(err, kv.ErrTransactionCancelled) {
		t.Errorf("Wait on a cancelled watch = %v, want transaction_cancelled", err)
	}
}

// TestOpenNeverDestroysTheApplicationsHandle: the binding's
// fdb.OpenDatabase caches one handle per cluster file. fdbkv.Open used to
// take that cached handle, so its Close destroyed the application's
// database (use after free in libfdb_c), and the application's Close
// destroyed fdbkv's. Open's handle is now its own.
func TestOpenNeverDestroysTheApplicationsHandle(t *testing.T) {
	testDatabase(t) // selects the API version
	path := clusterFile(t)
	ctx := testContext(t)
	readVersion := func(db *fdbkv.Database) error {
		return db.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
			_, err := tr.GetReadVersion().Get()
			return err
		})
	}

	app, err := fdb.OpenDatabase(path) // the binding's cached handle
	if err != nil {
		t.Fatalf("fdb.OpenDatabase: %v", err)
	}
	appOwned := true
	defer func() {
		if appOwned {
			app.Close()
		}
	}()
	a, err := fdbkv.Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := readVersion(a); err != nil {
		t.Fatalf("reading through Open's database: %v", err)
	}
	a.Close()
	a.Close() // a second Close does nothing
	if err := readVersion(fdbkv.Wrap(app)); err != nil {
		t.Fatalf("the application's handle after fdbkv's Close: %v", err)
	}

	// The other way round: the application closes its handle; fdbkv's
	// database still works.
	b, err := fdbkv.Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer b.Close()
	app.Close()
	appOwned = false
	if err := readVersion(b); err != nil {
		t.Fatalf("Open's database after the application closed its own handle: %v", err)
	}
	if err := readVersion(testDatabase(t)); err != nil {
		t.Fatalf("the shared test database after the application closed its handle: %v", err)
	}
}

// TestResetClearsOptionsOnFDB: FDB's Reset clears the transaction's options
// (ReadYourWritesTransaction::reset, fdbclient/ReadYourWrites.actor.cpp)
// while OnError keeps them (resetRyow re-applies persistent options).
// fdbkv passes both through; callers that Reset set their options again.
func TestResetClearsOptionsOnFDB(t *testing.T) {
	db := testDatabase(t)
	ctx := testContext(t)

	tr, err := db.CreateTransaction(ctx)
	if err != nil {
		t.Fatalf("CreateTransaction: %v", err)
	}
	if err := tr.Options().SetRetryLimit(1); err != nil {
		t.Fatalf("SetRetryLimit(1): %v", err)
	}
	if err := tr.OnError(kv.ErrNotCommitted); err != nil {
		t.Fatalf("first OnError(not_committed) with retry limit 1 = %v, want nil", err)
	}
	if err := tr.OnError(kv.ErrNotCommitted); !errors.Is(err, kv.ErrNotCommitted) {
		t.Fatalf("second OnError(not_committed) = %v: OnError did not keep the retry limit", err)
	}
	tr.Reset()
	if err := tr.Options().SetRetryLimit(0); err != nil {
		t.Fatalf("SetRetryLimit(0): %v", err)
	}
	tr.Reset()
	if err := tr.OnError(kv.ErrNotCommitted); err != nil {
		t.Errorf("OnError(not_committed) after Reset = %v, want nil: Reset should have cleared the retry limit of 0", err)
	}
}

// TestOnErrorOfCancelledTransaction: OnError of a cancelled transaction
// fails with transaction_cancelled and leaves it cancelled, for every
// code. Under the multi-version client (run with
// FDBKV_DISABLE_CLIENT_BYPASS=1, or with external client libraries), FDB's
// own OnError answers cluster_version_changed with a new transaction, not
// cancelled (MultiVersionTransaction::onError), which the old adapter
// handed back as a retry: there, the read below succeeded.
func TestOnErrorOfCancelledTransaction(t *testing.T) {
	db := testDatabase(t)
	prefix := testPrefix(t, db)
	ctx := testContext(t)
	for _, code := range []kv.Error{kv.ErrClusterVersionChanged, kv.ErrNotCommitted} {
		tr, err := db.CreateTransaction(ctx)
		if err != nil {
			t.Fatalf("CreateTransaction: %v", err)
		}
		tr.Cancel()
		if err := tr.OnError(code); !errors.Is(err, kv.ErrTransactionCancelled) {
			t.Errorf("OnError(%v) after Cancel = %v, want transaction_cancelled", code, err)
		}
		if _, err := tr.Get(key(prefix, "k")).Get(); !errors.Is(err, kv.ErrTransactionCancelled) {
			t.Errorf("a read after Cancel and OnError(%v) = %v, want transaction_cancelled", code, err)
		}
	}
}

// TestWatchesOfAnAttemptThatDoesNotCommit: a watch whose read is done
// (the key was read first, so the transaction answers it from its cache
// and hands the watch to the native transaction at once) fails when its
// transaction is cancelled, and with the commit's error when the commit
// fails before FDB's native commit runs (an invalid write's deferred
// error). FDB itself fails such a watch only when the native commit
// fails, or the native transaction is reset or destroyed (RYWImpl::watch,
// fdbclient/ReadYourWrites.actor.cpp; commitAndWatch,
// Transaction::resetImpl, fdbclient/NativeAPI.actor.cpp), and the binding
// keeps the transaction while the watch's future lives: with the old
// adapter both Waits below ran into their deadline.
func TestWatchesOfAnAttemptThatDoesNotCommit(t *testing.T) {
	db := testDatabase(t)
	prefix := testPrefix(t, db)
	ctx := testContext(t)
	k := key(prefix, "k")
	if err := db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set(k, []byte("v"))
		return nil
	}); err != nil {
		t.Fatalf("seeding: %v", err)
	}
	for _, tc := range []struct {
		name string
		end  func(tr kv.Transaction) error
		want kv.Error
	}{
		{"Cancel", func(tr kv.Transaction) error { tr.Cancel(); return nil }, kv.ErrTransactionCancelled},
		{"CommitFailsBeforeSending", func(tr kv.Transaction) error {
			tr.Set(bytes.Repeat([]byte{'k'}, kv.MaxKeySize+1), []byte("x"))
			if err := tr.Commit(); !errors.Is(err, kv.ErrKeyTooLarge) {
				return fmt.Errorf("Commit = %v, want key_too_large", err)
			}
			return nil
		}, kv.ErrKeyTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := db.CreateTransaction(ctx)
			if err != nil {
				t.Fatalf("CreateTransaction: %v", err)
			}
			if _, err := tr.Get(k).Get(); err != nil {
				t.Fatalf("Get: %v", err)
			}
			w := tr.Watch(k)
			defer w.Cancel()
			if err := tc.end(tr); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := w.Wait(wctx); !errors.Is(err, tc.want) {
				t.Errorf("Wait = %v, want %v", err, tc.want)
			}
		})
	}
}
