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
