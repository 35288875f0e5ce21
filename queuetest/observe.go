package queuetest

import (
	"context"
	"sync"

	"github.com/fdbqueue/fdbqueue/kv"
)

// watchObserver is the harness's database as one staged caller sees it: it
// reports on armed each time a transaction that created watches commits.
// The staged dequeue arms its watches in a transaction of its own and
// sleeps from that commit on; a watch compares with the value its
// transaction saw, so any change committed after armed fires wakes the
// waiter. This is how the checks know a waiter is asleep without sleeping
// themselves. It relies only on kv's contract: a watch is registered when
// its transaction commits.
type watchObserver struct {
	kv.Database
	armed chan struct{}
}

func newWatchObserver(db kv.Database) *watchObserver {
	return &watchObserver{Database: db, armed: make(chan struct{}, 64)}
}

// CreateTransaction wraps the transaction to see its Watch and Commit calls.
// (Transact and ReadTransact go to the database unwrapped: the staged
// dequeue arms its watches only in transactions it creates itself.)
func (o *watchObserver) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	tr, err := o.Database.CreateTransaction(ctx)
	if err != nil {
		return nil, err
	}
	return &observedTx{Transaction: tr, o: o}, nil
}

type observedTx struct {
	kv.Transaction
	o       *watchObserver
	mu      sync.Mutex
	watches int
}

func (t *observedTx) Watch(key []byte) kv.Watch {
	t.mu.Lock()
	t.watches++
	t.mu.Unlock()
	return t.Transaction.Watch(key)
}

func (t *observedTx) take() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.watches
	t.watches = 0
	return n
}

func (t *observedTx) Commit() error {
	err := t.Transaction.Commit()
	if n := t.take(); err == nil && n > 0 {
		select {
		case t.o.armed <- struct{}{}:
		default:
		}
	}
	return err
}

func (t *observedTx) Reset() {
	t.take()
	t.Transaction.Reset()
}

func (t *observedTx) OnError(err error) error {
	t.take()
	return t.Transaction.OnError(err)
}
