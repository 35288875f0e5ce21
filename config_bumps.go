package fdbqueue

import (
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// Transactions that wrote a record, and those that bumped the metadata
// version.
//
// FoundationDB fails a read of \xff/metadataVersion after a bump in the
// same transaction with accessed_unreadable (1036: the new value is a
// versionstamp, known at commit), and a read that failed fails the
// transaction's commit too: ReadYourWritesTransaction::get adds every
// read to reading, an AndFuture that keeps failed futures, and
// RYWImpl::commit awaits it (fdbclient/ReadYourWrites.actor.cpp). An operation
// must therefore not read the metadata version in a transaction where a
// record write (confGate.write) bumped it: two WatchForItems on fresh
// queues, or a Reconfigure and an Enqueue, in one transaction. bumps
// remembers such transactions, keyed by the transaction the operation was
// given (under the layer's own wrapper) and its read version, which a
// Reset or a retry changes. An operation in one of them reads the record
// as the transaction sees it and conflicts on the epoch key instead. In a
// transaction that wrote a record without a bump, an operation reads the
// metadata version but caches nothing: the record it reads is the
// transaction's own, which may never commit. An operation on a Database
// runs in a transaction of its own, in which nothing bumped before it,
// and does not look.
//
// A transaction is known by its address, which keeps nothing alive (a
// transaction of the backend can pin much more than itself). An address
// reused by a later transaction with the same read version within the
// 10 seconds only makes an operation read the record and cache nothing:
// the safe side. A transaction that is not a pointer (a wrapper struct, say)
// is not remembered: its later operations read the metadata version and
// fail as FoundationDB fails them. So do operations after a bump made by
// code other than this package's: bump the metadata version after the
// queue operations of a transaction.
var bumps bumpSet

type bumpSet struct {
	n  atomic.Int32 // entries: a lock-free "none" for the hot path
	mu sync.Mutex
	m  map[uintptr]bumpEntry
}

type bumpEntry struct {
	rv     int64     // the read version of the writing attempt
	at     time.Time // when, for pruning
	bumped bool      // it bumped the metadata version, not only wrote a record
}

// bumpKeep is how long an entry is kept: longer than a transaction can
// read at one read version (its reads fail with transaction_too_old after
// 5 s, and a retry has a new read version).
const bumpKeep = 10 * time.Second

// txKey returns what bumps keys tr by: the address of the transaction
// under the layer's wrapper, if it is a pointer.
func txKey(tr kv.ReadTransaction) (uintptr, bool) {
	if t, ok := tr.(*trackedTx); ok {
		tr = t.Transaction
	}
	if tr == nil {
		return 0, false
	}
	v := reflect.ValueOf(tr)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return 0, false
	}
	return v.Pointer(), true
}

// note records that tr, at its read version, wrote a record, and bumped
// the metadata version if bumped.
func (b *bumpSet) note(tr kv.Transaction, bumped bool) {
	k, ok := txKey(tr)
	if !ok {
		return
	}
	rv, err := tr.GetReadVersion().Get() // the operation has read: at hand
	if err != nil {
		return
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = make(map[uintptr]bumpEntry)
	}
	e := b.m[k]
	if e.rv != rv {
		e = bumpEntry{rv: rv}
	}
	e.at, e.bumped = now, e.bumped || bumped
	b.m[k] = e
	b.pruneLocked(now)
}

// pruneLocked drops the entries older than bumpKeep (b.mu held).
func (b *bumpSet) pruneLocked(now time.Time) {
	for k, e := range b.m {
		if now.Sub(e.at) > bumpKeep {
			delete(b.m, k)
		}
	}
	b.n.Store(int32(len(b.m)))
}

// lookup reports whether tr, at its current read version (which it then
// has, so asking for it costs nothing), wrote a record, and whether it
// bumped the metadata version.
func (b *bumpSet) lookup(tr kv.ReadTransaction) (wrote, bumped bool) {
	if b.n.Load() == 0 {
		return false, false
	}
	k, ok := txKey(tr)
	if !ok {
		return false, false
	}
	b.mu.Lock()
	b.pruneLocked(time.Now())
	e, found := b.m[k]
	b.mu.Unlock()
	if !found {
		return false, false
	}
	if rv, err := tr.GetReadVersion().Get(); err != nil || rv != e.rv {
		return false, false
	}
	return true, e.bumped
}
