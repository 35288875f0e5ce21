package memdb_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/require"
)

// fired reports whether w has completed, without blocking.
func fired(w kv.Watch) (bool, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := w.Wait(ctx)
	if err == context.Canceled {
		return false, nil
	}
	return true, err
}

// watchKey commits a transaction that watches key and returns the watch.
func watchKey(t *testing.T, db *memdb.DB, key string) kv.Watch {
	t.Helper()
	tr := newTx(t, db)
	get(t, tr, key)
	w := tr.Watch([]byte(key))
	require.NoError(t, tr.Commit())
	return w
}

func TestWatchFiresOnChange(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "k", "1")
	w := watchKey(t, db, "k")
	done, _ := fired(w)
	require.False(t, done, "nothing changed yet")
	mustSet(t, db, "k", "1")
	done, _ = fired(w)
	require.False(t, done, "writing the same value is not a change")
	mustSet(t, db, "other", "x")
	done, _ = fired(w)
	require.False(t, done)
	require.Equal(t, int64(1), db.Stats().Watches)
	mustSet(t, db, "k", "2")
	require.NoError(t, w.Wait(t.Context()))
	require.Equal(t, int64(0), db.Stats().Watches)
}

func TestWatchFiresOnClearRangeAndAtomic(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "a", "1")
	w1 := watchKey(t, db, "a")
	w2 := watchKey(t, db, "counter")
	require.NoError(t, db.Transact(t.Context(), func(tr kv.Transaction) error {
		tr.ClearRange(rng("", "b"))
		tr.Add([]byte("counter"), le64(1))
		return nil
	}))
	require.NoError(t, w1.Wait(t.Context()))
	require.NoError(t, w2.Wait(t.Context()))
}

func TestWatchSeesChangeBetweenReadAndCommit(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "k", "1")
	tr := newTx(t, db)
	require.Equal(t, "1", string(get(t, tr, "k")))
	w := tr.Watch([]byte("k"))
	mustSet(t, db, "k", "2") // after the watcher's read, before its commit
	require.NoError(t, tr.Commit())
	require.NoError(t, w.Wait(t.Context()), "the value differs from what the watcher saw: fire at once")
}

func TestWatchOnOwnWrite(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	tr.Set([]byte("k"), []byte("mine"))
	w := tr.Watch([]byte("k"))
	require.NoError(t, tr.Commit())
	done, _ := fired(w)
	require.False(t, done, "the watch starts from the transaction's own write")
	mustSet(t, db, "k", "theirs")
	require.NoError(t, w.Wait(t.Context()))
}

// A watch reads its key (RYWImpl::watch in FDB's ReadYourWrites.actor.cpp
// reads it with a normal read): a transaction that watches k beside a
// versionstamped key, and commits after another changed k, fails with
// not_committed, and so does its watch. Without the change, it commits and
// the watch fires on a later change.
func TestWatchBesideVersionstampedKey(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "k", "1")
	vsKey := append([]byte("vs"), append(make([]byte, 10), 2, 0, 0, 0)...)
	tr := newTx(t, db)
	w := tr.Watch([]byte("k"))
	tr.SetVersionstampedKey(vsKey, []byte("x"))
	require.NoError(t, db.Transact(t.Context(), clearTx("k"))) // after the watcher's read, before its commit
	require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted, "the watch's read of k conflicts")
	require.ErrorIs(t, w.Wait(t.Context()), kv.ErrNotCommitted)

	tr = newTx(t, db)
	w = tr.Watch([]byte("k"))
	tr.SetVersionstampedKey(vsKey, []byte("x"))
	require.NoError(t, tr.Commit())
	done, _ := fired(w)
	require.False(t, done, "k is still absent, as the watcher read it")
	mustSet(t, db, "k", "2")
	require.NoError(t, w.Wait(t.Context()))
}

func TestWatchFailsWithFailedCommit(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "k", "1")
	tr := newTx(t, db)
	get(t, tr, "k")
	w := tr.Watch([]byte("k"))
	tr.Set([]byte("x"), []byte("y"))
	mustSet(t, db, "k", "2")
	require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted)
	require.ErrorIs(t, w.Wait(t.Context()), kv.ErrNotCommitted, "a failed commit fails its watches with its error")
	require.Equal(t, int64(0), db.Stats().Watches)
}

func TestWatchCancelledByResetCancelAndCancelMethod(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	w := tr.Watch([]byte("k"))
	tr.Reset()
	require.ErrorIs(t, w.Wait(t.Context()), kv.ErrTransactionCancelled)

	w = tr.Watch([]byte("k"))
	tr.Cancel()
	require.ErrorIs(t, w.Wait(t.Context()), kv.ErrTransactionCancelled)

	w = watchKey(t, db, "k")
	w.Cancel()
	require.ErrorIs(t, w.Wait(t.Context()), kv.ErrTransactionCancelled)
	mustSet(t, db, "k", "1") // must not touch the cancelled watch
	require.Equal(t, int64(0), db.Stats().Watches)
}

func TestWatchWaitHonoursContext(t *testing.T) {
	db, _ := newDB(t)
	w := watchKey(t, db, "k")
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- w.Wait(ctx) }()
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	mustSet(t, db, "k", "1")
	require.NoError(t, w.Wait(t.Context()), "a Wait that gave up leaves the watch registered")
}

func TestTooManyWatches(t *testing.T) {
	db, _ := newDB(t, memdb.WithMaxWatches(3))
	var ws []kv.Watch
	for i := range 3 {
		ws = append(ws, watchKey(t, db, fmt.Sprint("k", i)))
	}
	tr := newTx(t, db)
	w := tr.Watch([]byte("more"))
	require.ErrorIs(t, w.Wait(t.Context()), kv.ErrTooManyWatches)
	ws[0].Cancel()
	w = tr.Watch([]byte("more"))
	require.NoError(t, tr.Commit())
	done, _ := fired(w)
	require.False(t, done, "a slot freed by Cancel can be used again")
}

func TestWatchFailsOnClose(t *testing.T) {
	db, _ := newDB(t)
	w := watchKey(t, db, "k")
	tr := newTx(t, db)
	pending := tr.Watch([]byte("k"))
	require.NoError(t, db.Close())
	require.ErrorIs(t, w.Wait(t.Context()), memdb.ErrClosed)
	require.ErrorIs(t, pending.Wait(t.Context()), memdb.ErrClosed)
}

// TestWatchNeverMissesAChange races writers against watchers: every watch
// registered by a committed transaction must fire once its key changes.
func TestWatchNeverMissesAChange(t *testing.T) {
	db, _ := newDB(t)
	const rounds = 200
	var wg sync.WaitGroup
	for i := range rounds {
		key := fmt.Sprint("w", i%7)
		wg.Add(2)
		watched := make(chan kv.Watch, 1)
		go func() {
			defer wg.Done()
			tr := newTx(t, db)
			get(t, tr, key)
			w := tr.Watch([]byte(key))
			if err := tr.Commit(); err != nil {
				t.Error(err)
			}
			watched <- w
		}()
		go func() {
			defer wg.Done()
			w := <-watched
			// A change after the watch's commit must fire it.
			mustSet(t, db, key, fmt.Sprint("v", i))
			if err := w.Wait(t.Context()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// A client woken by a watch sees the change in its next transaction: FDB
// promises causality (developer-guide.rst, "a transaction is guaranteed to
// see the effects of all other transactions that commit before it
// begins"; api-c.rst, a read version "represent[s] all transactions which
// were reported committed"), and its watch fires from a storage server
// that has applied the committed version. memdb fires watches only once
// the commit's version is every new transaction's read version. The race
// it closes was a few instructions wide, so the test tries many times.
func TestWatchWakesAfterTheChangeIsReadable(t *testing.T) {
	db := memdb.New()
	defer db.Close()
	ctx := context.Background()
	key := []byte("signal")
	for i := range 3000 {
		want := []byte(fmt.Sprint(i))
		tr := newTx(t, db)
		_, err := tr.Get(key).Get()
		require.NoError(t, err)
		w := tr.Watch(key)
		require.NoError(t, tr.Commit())
		seen := make(chan []byte, 1)
		go func() {
			if err := w.Wait(ctx); err != nil {
				seen <- []byte(err.Error())
				return
			}
			v, _ := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]byte, error) { return tr.Get(key).Get() })
			seen <- v
		}()
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
			tr.Set(key, want)
			return nil
		}))
		require.Equal(t, want, <-seen, "iteration %d: the transaction after the watch fired reads the change", i)
	}
}

// A Commit issued while a watch reads its key waits for the watch and
// registers it: FDB's RYWImpl::watch adds a promise of its own to
// reading, which RYWImpl::commit waits for, and sets it only once it has
// handed the watch to the native transaction (tr.watch), whose commit
// then sets it up (commitAndWatch; fdbclient/ReadYourWrites.actor.cpp and
// NativeAPI.actor.cpp). memdb's commit waited only for the read itself,
// and the watch, registering after it, found the commit started and
// failed the transaction with used_during_commit.
func TestWatchCommitIssuedDuringItsReadRegistersIt(t *testing.T) {
	clk := &hookClock{ManualClock: memdb.NewManualClock(epoch)}
	db, _ := newDB(t, memdb.WithClock(clk), memdb.WithLatency(memdb.Latency{Read: memdb.Span{Min: time.Microsecond, Max: time.Microsecond}}))
	waiting := make(chan struct{}, 1)
	db.SetAwaitingReads(func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	})
	mustSet(t, db, "k", "1")
	tr := newTx(t, db)
	t.Cleanup(tr.Cancel)
	_, err := tr.GetReadVersion().Get()
	require.NoError(t, err)

	served, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	t.Cleanup(let) // a failed check leaves nothing blocked
	hook := func() { close(served); <-release }
	clk.armed.Store(&hook)
	watched := make(chan kv.Watch, 1)
	go func() { watched <- tr.Watch([]byte("k")) }()
	<-served // the watch's read is in flight, held
	committed := make(chan error, 1)
	go func() { committed <- tr.Commit() }()
	<-waiting // the commit waits for it
	let()
	w := <-watched
	t.Cleanup(w.Cancel)
	require.NoError(t, <-committed, "a commit issued after the watch is not used during commit")
	done, err := fired(w)
	require.NoError(t, err, "the watch must be registered by the commit, not failed")
	require.False(t, done, "nothing changed k")
	mustSet(t, db, "k", "2")
	require.NoError(t, w.Wait(t.Context()), "the registered watch fires when k changes")
}

// A watch compares with the value its read saw, not with what the
// transaction wrote after it (api-common.rst.inc: "The initial value used
// for comparison is either that of the transaction's read version or the
// value as modified by the transaction itself prior to the creation of the
// watch"; RYWImpl::watch keeps watch->value, and the storage server fires
// once the key's value differs from it). Here the transaction's own
// versionstamped key becomes the watched key at commit: the key changed
// from missing, so the watch fires. memdb compared with the committed
// value and never fired it.
func TestWatchComparesWithItsReadNotWithLaterOwnWrites(t *testing.T) {
	db, _ := newDB(t)
	before := newTx(t, db)
	before.Set([]byte("a"), []byte("1"))
	require.NoError(t, before.Commit())
	v, err := before.GetCommittedVersion()
	require.NoError(t, err)
	// The clock stands still: the next commit's version is v+1, its
	// versionstamp v+1 and batch order 0.
	key := binary.BigEndian.AppendUint64([]byte("vs"), uint64(v+1))
	key = append(key, 0, 0)

	tr := newTx(t, db)
	w := tr.Watch(key) // reads: missing
	t.Cleanup(w.Cancel)
	tr.SetVersionstampedKey(append([]byte("vs"), append(make([]byte, 10), 2, 0, 0, 0)...), []byte("x"))
	require.NoError(t, tr.Commit())
	cv, err := tr.GetCommittedVersion()
	require.NoError(t, err)
	require.Equal(t, v+1, cv, "the test's prediction of the commit version")
	got, _ := mustGet(t, db, string(key))
	require.Equal(t, "x", got, "the versionstamped key became the watched key")
	done, err := fired(w)
	require.NoError(t, err)
	require.True(t, done, "the key changed from the value the watch read (missing): fire at once")
}

// A read-only transaction's watch compares with the value it read however
// old its read version is when it commits: FDB's storage server waits for
// the watch's version without transaction_too_old
// (waitForVersionNoTooOld) and fires only if the key's latest value
// differs (watchWaitForValueChange, fdbserver/storageserver.actor.cpp).
// memdb fired such a watch at once, a spurious fire it promises not to
// make (package doc: watches never fire spuriously on their own).
func TestWatchOfReadOnlyTransactionPastTheWindowFiresOnlyOnChange(t *testing.T) {
	db, clk := newDB(t, memdb.WithMVCCWindow(time.Second))
	mustSet(t, db, "k", "1")
	tr := newTx(t, db)
	w := tr.Watch([]byte("k"))
	t.Cleanup(w.Cancel)
	clk.Advance(2 * time.Second)
	mustSet(t, db, "other", "x") // the read version is out of the window
	require.NoError(t, tr.Commit(), "a read-only commit always succeeds")
	done, err := fired(w)
	require.NoError(t, err)
	require.False(t, done, "k still holds the value the watch read")
	mustSet(t, db, "k", "2")
	require.NoError(t, w.Wait(t.Context()))
}

// The metadata version key may be watched: it is the one key under \xff
// that ReadYourWritesTransaction::watch accepts without the system-key
// options (fdbclient/ReadYourWrites.actor.cpp). A bump fires the watch,
// another transaction's after the commit, the watching transaction's own
// at once. memdb failed such a watch with key_outside_legal_range.
func TestWatchMetadataVersionKey(t *testing.T) {
	db, _ := newDB(t)
	mv := []byte(kv.MetadataVersionKey)
	tr := newTx(t, db)
	w := tr.Watch(mv)
	t.Cleanup(w.Cancel)
	require.NoError(t, tr.Commit())
	done, err := fired(w)
	require.NoError(t, err, "a watch on the metadata version key is allowed")
	require.False(t, done, "nothing bumped the metadata version yet")
	require.NoError(t, db.Transact(t.Context(), func(tr kv.Transaction) error {
		kv.BumpMetadataVersion(tr)
		return nil
	}))
	require.NoError(t, w.Wait(t.Context()), "a bump fires the watch")

	tr = newTx(t, db)
	w = tr.Watch(mv)
	t.Cleanup(w.Cancel)
	require.NoError(t, tr.Commit())
	require.NoError(t, db.Transact(t.Context(), func(tr kv.Transaction) error {
		tr.Set([]byte("a"), []byte("x"))
		return nil
	}))
	done, _ = fired(w)
	require.False(t, done, "a commit that does not bump the metadata version leaves it")

	tr = newTx(t, db)
	w = tr.Watch(mv)
	t.Cleanup(w.Cancel)
	kv.BumpMetadataVersion(tr)
	done, err = fired(w)
	require.NoError(t, err)
	require.True(t, done, "the transaction's own bump fires its watch at once")
	tr.Cancel()
}
