package memdb

import (
	"bytes"
	"context"
	"sync"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/tidwall/btree"
)

// watch implements kv.Watch.
type watch struct {
	db  *DB
	key []byte
	// ref is the value the watching transaction saw; the watch fires when a
	// commit makes the key's value differ from it.
	ref   []byte
	refOK bool

	done chan struct{}
	once sync.Once
	err  error
}

var _ kv.Watch = (*watch)(nil)

// failedWatch returns a watch that has already failed with err.
func failedWatch(err error) *watch {
	w := &watch{done: make(chan struct{}), err: err}
	close(w.done)
	w.once.Do(func() {})
	return w
}

// Wait blocks until the watch fires (nil), fails (its error) or ctx ends
// (ctx.Err(); the watch stays registered).
func (w *watch) Wait(ctx context.Context) error {
	select {
	case <-w.done:
		return w.err
	default:
	}
	if ctx == nil {
		<-w.done
		return w.err
	}
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Cancel releases the watch; a pending Wait returns
// kv.ErrTransactionCancelled.
func (w *watch) Cancel() {
	if w.db == nil {
		return
	}
	if w.finish(kv.ErrTransactionCancelled) {
		w.db.mu.Lock()
		w.db.watches.remove(w)
		w.db.mu.Unlock()
	}
}

// finish completes the watch with err (nil: fired) and reports whether this
// call did it. It does not remove the watch from the registry.
func (w *watch) finish(err error) bool {
	did := false
	w.once.Do(func() {
		did = true
		w.err = err
		close(w.done)
		if w.db != nil {
			w.db.untrackWatch(w)
		}
	})
	return did
}

// differs reports whether (val, ok) differs from the watch's reference.
func (w *watch) differs(val []byte, ok bool) bool {
	return ok != w.refOK || !bytes.Equal(val, w.ref)
}

// watchRegistry holds the registered watches by key. It is protected by
// DB.mu.
type watchRegistry struct {
	byKey btree.Map[string, []*watch]
	n     int
}

func (r *watchRegistry) add(w *watch) {
	k := string(w.key)
	list, _ := r.byKey.Get(k)
	r.byKey.Set(k, append(list, w))
	r.n++
}

func (r *watchRegistry) remove(w *watch) {
	k := string(w.key)
	list, ok := r.byKey.Get(k)
	if !ok {
		return
	}
	for i, x := range list {
		if x == w {
			list = append(list[:i], list[i+1:]...)
			r.n--
			break
		}
	}
	if len(list) == 0 {
		r.byKey.Delete(k)
	} else {
		r.byKey.Set(k, list)
	}
}

// changed fires the watches on key whose reference differs from the key's
// new value.
func (r *watchRegistry) changed(key []byte, val []byte, ok bool) {
	if r.n == 0 {
		return
	}
	k := string(key)
	list, found := r.byKey.Get(k)
	if !found {
		return
	}
	kept := list[:0]
	for _, w := range list {
		if w.differs(val, ok) {
			w.finish(nil)
			r.n--
		} else {
			kept = append(kept, w)
		}
	}
	clear(list[len(kept):])
	if len(kept) == 0 {
		r.byKey.Delete(k)
	} else {
		r.byKey.Set(k, kept)
	}
}

// keysIn returns the watched keys in [b, e).
func (r *watchRegistry) keysIn(b, e []byte) [][]byte {
	if r.n == 0 {
		return nil
	}
	var keys [][]byte
	end := string(e)
	r.byKey.Ascend(string(b), func(k string, _ []*watch) bool {
		if k >= end {
			return false
		}
		keys = append(keys, []byte(k))
		return true
	})
	return keys
}

// failAll fails every registered watch with err.
func (r *watchRegistry) failAll(err error) {
	r.byKey.Scan(func(_ string, list []*watch) bool {
		for _, w := range list {
			w.finish(err)
		}
		return true
	})
	r.byKey.Clear()
	r.n = 0
}

// Watch returns a watch on key, registered when the transaction commits.
// Like FDB's (RYWImpl::watch, fdbclient/ReadYourWrites.actor.cpp), it reads
// the key with a normal read: the read adds a read conflict range (unless
// the transaction wrote the key), its error fails the watch but not the
// commit (RYWImpl::watch gives the commit a promise of its own, which it
// sets even when the read fails), and the value it saw is what the
// transaction's own later writes, and after the commit the database's, are
// compared with. Watch waits for that read (with a latency model, a read
// delay). A Commit issued meanwhile waits for the watch and registers it,
// as FDB's waits for reading, to which RYWImpl::watch adds its promise
// until it has handed the watch to the native transaction.
func (tx *transaction) Watch(key []byte) kv.Watch {
	tx.mu.Lock()
	// The transaction's errors come first, then the key's, as in FDB
	// (ThreadSafeTransaction::watch checks the deferred error, then
	// ReadYourWritesTransaction::watch used_during_commit, a cancellation,
	// the key's range and its size).
	if err := tx.checkLocked(); err != nil {
		tx.mu.Unlock()
		return failedWatch(err)
	}
	if len(key) > 0 && key[0] == 0xff && !isMetadataVersionKey(key) {
		// The metadata version key may be watched, as in FDB (the one key
		// ReadYourWritesTransaction::watch exempts): a bump fires it.
		tx.mu.Unlock()
		return failedWatch(kv.ErrKeyOutsideLegalRange)
	}
	if len(key) > maxKeySize {
		tx.mu.Unlock()
		return failedWatch(kv.ErrKeyTooLarge)
	}
	gen := tx.gen
	tx.startReadLocked()
	tx.mu.Unlock()
	val, err := tx.get(key, false, &gen).Get()
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.endReadLocked(gen)
	if derr := tx.deliverableLocked(gen); derr != nil {
		return failedWatch(derr) // reset or cancelled meanwhile
	}
	if err != nil {
		return failedWatch(err)
	}
	if !tx.db.reserveWatch() {
		return failedWatch(kv.ErrTooManyWatches)
	}
	w := &watch{db: tx.db, key: bytes.Clone(key), done: make(chan struct{})}
	if w.key == nil {
		w.key = []byte{}
	}
	w.ref, w.refOK = val, val != nil
	tx.db.trackWatch(w)
	x := tx.cold()
	x.watches = append(x.watches, w)
	return w
}

// ownWriteLocked fires at once the unregistered watches in [b, e) whose
// value the transaction's own write changes, as FDB's triggerWatches does
// (fdbclient/ReadYourWrites.actor.cpp; api-c.rst: "a watch will
// immediately report changes made by the transaction itself"). known is
// false for a write whose result depends on the database (an atomic
// operation, a versionstamped value): such a write fires the watch.
func (tx *transaction) ownWriteLocked(b, e, val []byte, ok, known bool) {
	x := tx.x
	if x == nil || len(x.watches) == 0 {
		return
	}
	kept := x.watches[:0]
	for _, w := range x.watches {
		in := bytes.Compare(w.key, b) >= 0 && (e == nil && bytes.Equal(w.key, b) || e != nil && bytes.Compare(w.key, e) < 0)
		if in && (!known || w.differs(val, ok)) {
			w.finish(nil)
			continue
		}
		kept = append(kept, w)
	}
	clear(x.watches[len(kept):])
	x.watches = kept
}

// failWatchesLocked fails the watches not yet registered.
func (tx *transaction) failWatchesLocked(err error) {
	x := tx.x
	if x == nil {
		return
	}
	for _, w := range x.watches {
		w.finish(err)
	}
	x.watches = nil
}
