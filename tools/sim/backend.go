package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// backend is the database a seed runs on: a memdb of its own, with
// injected faults and counters, or Config.DB.
type backend interface {
	kv.Database
	setFaults(memdb.Faults)
	stats() memdb.Stats
	close()
	// quiesce waits until no interrupted commit is still to land.
	quiesce()
}

func newBackend(seed int64, cfg Config) backend {
	if cfg.DB != nil {
		return given{cfg.DB}
	}
	opts := []memdb.Option{
		memdb.WithSeed(seed),
		memdb.WithFaults(cfg.Faults),
		memdb.WithLatency(cfg.Latency),
		memdb.WithBackoff(100*time.Microsecond, 5*time.Millisecond),
	}
	if cfg.MVCCWindow > 0 {
		opts = append(opts, memdb.WithMVCCWindow(cfg.MVCCWindow))
	}
	return own{memdb.New(opts...)}
}

// own is the seed's own memdb.
type own struct{ *memdb.DB }

func (o own) setFaults(f memdb.Faults) { o.SetFaults(f) }
func (o own) stats() memdb.Stats       { return o.Stats() }
func (o own) close()                   { _ = o.Close() }
func (o own) quiesce()                 { o.AwaitLateLandings() }

// given is Config.DB: nothing to inject, count or close.
type given struct{ kv.Database }

func (given) setFaults(memdb.Faults) {}
func (given) stats() memdb.Stats     { return memdb.Stats{} }
func (given) close()                 {}

// quiesce cannot know when FoundationDB has resolved the commits that were
// interrupted in flight: their effects may still come after it.
func (given) quiesce() {}

// subspace is the tuple of the seed's structure name: ("sim", name) in
// the seed's own memdb, (Prefix..., seed, name) in Config.DB.
func (h *harness) subspace(name string) tuple.Tuple {
	if h.cfg.DB == nil {
		return tuple.Tuple{"sim", name}
	}
	return append(slices.Clip(h.cfg.Prefix), h.seed, name)
}

// timeoutDB is the database as a client sees it whose database has a
// default transaction timeout, FoundationDB's database option
// transaction_timeout (Config.TxTimeout): every transaction it makes
// carries the timeout from its creation, and again after every Reset,
// which restarts the clock (ReadYourWritesTransaction::reset sets
// creationTime to now and re-applies the database's defaults, the
// timeout among them; fdbclient/ReadYourWrites.actor.cpp). OnError keeps
// it and its clock: resetRyow re-applies the options without touching
// creationTime, so the time spent in retries counts. When the timeout
// passes while a commit is in flight, FoundationDB fails the commit
// with transaction_timed_out (1031) without fencing it (RYWImpl::commit
// returns as soon as resetPromise is set; only commit_unknown_result is
// preceded by commitDummyTransaction, fdbclient/NativeAPI.actor.cpp): the
// commit may still land, later (memdb's Faults.LateLanding). The layers
// see kv.CommitInterrupted(kv.ErrTransactionTimedOut), for which
// kv.MaybeCommitted is true, and, their context alive, go on.
type timeoutDB struct {
	kv.Database
	timeout time.Duration
	// inFlight counts the commits that timed out in flight.
	inFlight *atomic.Int64
}

// drawTxTimeout draws an operation's default transaction timeout, from
// max/2 to max.
func drawTxTimeout(rng *rand.Rand, max time.Duration) time.Duration {
	half := int64(max / 2)
	return time.Duration(half + rng.Int64N(int64(max)-half+1))
}

// CreateTransaction makes a transaction that carries the timeout.
func (d *timeoutDB) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	tr, err := d.Database.CreateTransaction(ctx)
	if err != nil {
		return nil, err
	}
	t := &timeoutTx{Transaction: tr, db: d}
	t.arm()
	return t, nil
}

// Transact runs fn with kv.RetryLoop over a transaction of CreateTransaction,
// as every backend's Transact does (kv.RetryCreated).
func (d *timeoutDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	return kv.RetryCreated(ctx, d, fn)
}

// ReadTransact is Transact for reads (kv.ReadRetryLoop).
func (d *timeoutDB) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	return kv.ReadRetryCreated(ctx, d, fn)
}

// timeoutTx is a transaction of a timeoutDB.
type timeoutTx struct {
	kv.Transaction
	db *timeoutDB
}

// arm sets the database's default timeout, which counts from the
// transaction's creation or last Reset (memdb's SetTimeout, as FDB's).
func (t *timeoutTx) arm() { _ = t.Options().SetTimeout(t.db.timeout) }

// Reset clears the transaction and its options, and sets the default
// timeout again, counting from now.
func (t *timeoutTx) Reset() {
	t.Transaction.Reset()
	t.arm()
}

// Commit counts the commits that timed out in flight.
func (t *timeoutTx) Commit() error {
	err := t.Transaction.Commit()
	if errors.Is(err, kv.ErrTransactionTimedOut) && kv.MaybeCommitted(err) {
		t.db.inFlight.Add(1)
	}
	return err
}

// Transact runs fn inside this transaction, through the wrapper.
func (t *timeoutTx) Transact(_ context.Context, fn func(kv.Transaction) error) error {
	return fn(t)
}
