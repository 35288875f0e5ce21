package sim

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// plantSeeds bounds the seeds a test of a planted bug runs until one
// catches it. It stops at the first, so the bound costs only when the bug
// hides: a seed's run depends on goroutine timing, and which seed first
// meets a bug varies from run to run (a DeleteDead applied twice was
// caught by seed 1 to 11 in 30 runs; under a bound of 12, a run now and
// then caught it in none).
const plantSeeds = 40

// Bugs planted in Requeue's and DeleteDead's transactions (through
// LeaseConfig.plant, which wraps what they write) must fail the lease
// simulation: a Requeue that keeps the dead job's attempt count, or that
// leaves its dead record; a DeleteDead that leaves the job's value, or
// its index entry; a Requeue or DeleteDead whose retry does not see its
// journal record, so that after commit_unknown_result (or a recovery by
// OpID of a commit that landed) it is applied a second time and reports
// ErrJobNotFound. The same runs without a plant pass.
func TestLeaseSimulationCatchesPlantedDeadJobBugs(t *testing.T) {
	cfg := rejectionConfig(DefaultLeaseConfig())
	// Shorter histories, more dead jobs, more Requeues and DeleteDeads,
	// and more of them retried after their commit applied, so that a few
	// seeds meet each bug and the checker rejects them quickly.
	cfg.Rounds, cfg.OneAttemptProb, cfg.RequeueProb, cfg.DeleteDeadProb = 6, 0.6, 0.15, 0.1
	cfg.Faults.UnknownApplied = 0.15
	sub, err := fdbqueue.NewSubspace(leaseSubspace)
	require.NoError(t, err)
	prefix := func(tag string) []byte {
		p, err := sub.Pack(tuple.Tuple{tag})
		require.NoError(t, err)
		return p
	}
	journal, err := tuple.Tuple{"j"}.AppendPack(append(sub.Bytes(), 0xff)) // see snapshotJournal
	require.NoError(t, err)
	plants := []struct {
		name string
		kind LeaseKind
		tx   func(kv.Transaction) kv.Transaction
	}{
		{"Requeue keeps the attempt count", LRequeue, func(tr kv.Transaction) kv.Transaction {
			return &keepAttempts{Transaction: tr, dead: prefix("d"), queued: prefix("q")}
		}},
		{"Requeue leaves the dead record", LRequeue, func(tr kv.Transaction) kv.Transaction {
			return skipClears{Transaction: tr, prefix: prefix("d")}
		}},
		{"DeleteDead leaves the value", LDeleteDead, func(tr kv.Transaction) kv.Transaction {
			return skipClears{Transaction: tr, prefix: prefix("v")}
		}},
		{"DeleteDead leaves the index entry", LDeleteDead, func(tr kv.Transaction) kv.Transaction {
			return skipClears{Transaction: tr, prefix: prefix("x")}
		}},
		{"Requeue applied twice (its retry blind to the journal)", LRequeue, func(tr kv.Transaction) kv.Transaction {
			return blindJournal{Transaction: tr, prefix: journal}
		}},
		{"DeleteDead applied twice (its retry blind to the journal)", LDeleteDead, func(tr kv.Transaction) kv.Transaction {
			return blindJournal{Transaction: tr, prefix: journal}
		}},
	}
	ctx := context.Background()
	for _, p := range plants {
		t.Run(p.name, func(t *testing.T) {
			c := cfg
			c.plant = func(kind LeaseKind, db kv.Database) kv.Database {
				if kind != p.kind {
					return db
				}
				return plantedDB{Database: db, tx: p.tx}
			}
			for seed := int64(1); seed <= plantSeeds; seed++ {
				r, err := RunLeases(ctx, seed, c)
				if err != nil || !r.OK() && r.Check != porcupine.Unknown {
					t.Logf("seed %d caught it: %s", seed, caught(r, err))
					return
				}
			}
			t.Fatal("no seed caught the planted bug")
		})
	}
	// The same configuration without a plant passes.
	met := 0
	for seed := int64(1); seed <= 3; seed++ {
		r, err := RunLeases(ctx, seed, cfg)
		require.NoError(t, err)
		require.True(t, r.OK(), "seed %d: %+v", seed, r)
		met += r.Requeued + r.Deleted
	}
	require.Positive(t, met)
}

// caught says which of RunLeases' checks failed.
func caught(r LeaseResult, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var s []string
	if r.Check != porcupine.Ok {
		s = append(s, "history "+checkName(r.Check))
	}
	for name, n := range map[string]int{"leftovers": r.Leftovers, "wrong counts": r.CountErrors, "lost": r.Lost,
		"deleted twice": r.DeletedTwice, "deleted and removed": r.DeletedAndRemoved, "dead without max attempts": r.DeadAttempts,
		"trusted Adds whose job was seen": r.TrustedAdded,
		"payload mismatches":              r.ValueMismatches, "budget errors": r.BudgetErrors} {
		if n > 0 {
			s = append(s, fmt.Sprintf("%s %d", name, n))
		}
	}
	return fmt.Sprint(s)
}

// plantedDB runs each transaction of its operation through tx, which
// plants a bug in what it reads or writes.
type plantedDB struct {
	kv.Database
	tx func(kv.Transaction) kv.Transaction
}

func (p plantedDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	return p.Database.Transact(ctx, func(tr kv.Transaction) error { return fn(p.tx(tr)) })
}

// skipClears drops the clears of the keys under prefix.
type skipClears struct {
	kv.Transaction
	prefix []byte
}

// Transact and ReadTransact run fn in the transaction as it is planted
// (a layer given it as its Transactor runs in it), not in the one it
// wraps.
func (s skipClears) Transact(_ context.Context, fn func(kv.Transaction) error) error { return fn(s) }

func (s skipClears) ReadTransact(_ context.Context, fn func(kv.ReadTransaction) error) error {
	return fn(s)
}

func (s skipClears) Clear(key []byte) {
	if !bytes.HasPrefix(key, s.prefix) {
		s.Transaction.Clear(key)
	}
}

// keepAttempts writes a requeued job's record (under queued) with the
// attempt count of the dead record (under dead) it clears.
type keepAttempts struct {
	kv.Transaction
	dead, queued []byte
	mu           sync.Mutex
	attempts     any // the cleared dead record's count
}

func (k *keepAttempts) Clear(key []byte) {
	if bytes.HasPrefix(key, k.dead) {
		if v, err := k.Transaction.Get(key).Get(); err == nil && v != nil {
			if rec, err := tuple.Unpack(v); err == nil && len(rec) > 3 {
				k.mu.Lock()
				k.attempts = rec[3]
				k.mu.Unlock()
			}
		}
	}
	k.Transaction.Clear(key)
}

func (k *keepAttempts) Set(key, value []byte) {
	k.mu.Lock()
	attempts := k.attempts
	k.mu.Unlock()
	if bytes.HasPrefix(key, k.queued) && attempts != nil {
		if rec, err := tuple.Unpack(value); err == nil && len(rec) > 3 {
			rec[3] = attempts
			if v, err := rec.Pack(); err == nil {
				value = v
			}
		}
	}
	k.Transaction.Set(key, value)
}

// blindJournal reads no journal record (under prefix): a retry of an
// operation that committed does not find that it did.
type blindJournal struct {
	kv.Transaction
	prefix []byte
}

func (b blindJournal) Get(key []byte) kv.FutureValue {
	if bytes.HasPrefix(key, b.prefix) {
		return absent{}
	}
	return b.Transaction.Get(key)
}

// absent is a read of a key that does not exist.
type absent struct{}

func (absent) Get() ([]byte, error) { return nil, nil }
