package kvtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

const (
	workers          = 32
	opsPerWorker     = 5
	accounts         = 4
	initialBalance   = 100
	transferWorkers  = 8
	transfersEach    = 10
	auditorsReadings = 20
)

// concurrencyTests run many goroutines against one database and check that
// no update is lost and every transaction sees a consistent state.
func concurrencyTests() []conformanceTest {
	return []conformanceTest{
		{"CounterReadModifyWrite", testCounterReadModifyWrite},
		{"CounterAtomicAdd", testCounterAtomicAdd},
		{"TransfersPreserveTotal", testTransfersPreserveTotal},
	}
}

// decode8 decodes an 8-byte little-endian counter (nil is zero) without
// failing the test, so that it can run in other goroutines.
func decode8(v []byte) (int64, error) {
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("counter value %x is not 8 bytes", v)
	}
	return int64(binary.LittleEndian.Uint64(v)), nil
}

// runWorkers runs fn(i) in n goroutines and returns their errors joined.
func runWorkers(n int, fn func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// testCounterReadModifyWrite: serializable read-modify-write loses no
// update (conflicting commits fail with not_committed and are retried:
// developer-guide.rst, transactions and conflicts).
func testCounterReadModifyWrite(t *testing.T, f *fixture) {
	key := f.key("counter")
	var runs atomic.Int64
	err := runWorkers(workers, func(int) error {
		for range opsPerWorker {
			err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
				runs.Add(1)
				v, err := tr.Get(key).Get()
				if err != nil {
					return err
				}
				n, err := decode8(v)
				if err != nil {
					return err
				}
				tr.Set(key, leInt64(n+1))
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err, "every read-modify-write Transact must end committed")
	require.Equal(t, int64(workers*opsPerWorker), decodeCounter(t, f.get(t, key)), "%d goroutines x %d read-modify-write increments must give the exact total (no lost update, no double apply)", workers, opsPerWorker)
	require.GreaterOrEqual(t, runs.Load(), int64(workers*opsPerWorker))
	t.Logf("%d runs for %d committed increments", runs.Load(), workers*opsPerWorker)
}

// testCounterAtomicAdd: atomic adds add no read conflict range, so they
// never conflict (ReadYourWritesTransaction::atomicOp,
// fdbclient/ReadYourWrites.actor.cpp; developer-guide.rst, atomic operations).
func testCounterAtomicAdd(t *testing.T, f *fixture) {
	key := f.key("counter")
	var runs atomic.Int64
	err := runWorkers(workers, func(int) error {
		for range opsPerWorker {
			err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
				runs.Add(1)
				tr.Add(key, le(1, 8))
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err, "every Add transaction must commit")
	require.Equal(t, int64(workers*opsPerWorker), decodeCounter(t, f.get(t, key)), "%d goroutines x %d atomic Adds must give the exact total", workers, opsPerWorker)
	require.Equal(t, int64(workers*opsPerWorker), runs.Load(), "concurrent Adds must never conflict, so no transaction may have been retried")
}

// testTransfersPreserveTotal: every transaction reads a consistent
// snapshot (serializable isolation: developer-guide.rst).
func testTransfersPreserveTotal(t *testing.T, f *fixture) {
	account := func(i int) []byte { return f.key(fmt.Sprintf("acct%d", i)) }
	transfers := f.key("transfers")
	setup := f.newTx(t)
	for i := range accounts {
		setup.Set(account(i), leInt64(initialBalance))
	}
	commit(t, setup)

	// Auditors read every account (and the transfer count) in one
	// transaction each and check the total, while transfers run.
	const total = accounts * initialBalance
	done := make(chan struct{})
	auditErr := make(chan error, 1)
	go func() {
		var err error
		defer func() { auditErr <- err }()
		for readings := 0; ; readings++ {
			select {
			case <-done:
				if readings >= auditorsReadings {
					return
				}
			default:
			}
			err = f.db.ReadTransact(f.ctx, func(rt kv.ReadTransaction) error {
				kvs, err := rt.GetRange(f.rng("acct", "acct\xff"), kv.RangeOptions{}).GetSlice()
				if err != nil {
					return err
				}
				sum := int64(0)
				for _, p := range kvs {
					n, err := decode8(p.Value)
					if err != nil {
						return err
					}
					sum += n
				}
				if sum != total || len(kvs) != accounts {
					return fmt.Errorf("an auditor saw %d accounts holding %d in all, want %d holding %d: a transaction saw a partial transfer", len(kvs), sum, accounts, total)
				}
				return nil
			})
			if err != nil {
				return
			}
		}
	}()

	err := runWorkers(transferWorkers, func(w int) error {
		from, to := account(w%accounts), account((w+1+w/accounts)%accounts)
		for range transfersEach {
			err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
				fv, tv := tr.Get(from), tr.Get(to)
				a, err := fv.Get()
				if err != nil {
					return err
				}
				b, err := tv.Get()
				if err != nil {
					return err
				}
				na, err := decode8(a)
				if err != nil {
					return err
				}
				nb, err := decode8(b)
				if err != nil {
					return err
				}
				tr.Set(from, leInt64(na-1))
				tr.Set(to, leInt64(nb+1))
				tr.Add(transfers, le(1, 8))
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	close(done)
	require.NoError(t, err, "every transfer must end committed")
	require.NoError(t, <-auditErr, "auditors must always see the same total")

	tr := f.newTx(t)
	sum := int64(0)
	for i := range accounts {
		sum += decodeCounter(t, mustGet(t, tr, account(i)))
	}
	require.Equal(t, int64(total), sum, "transfers must preserve the total")
	require.Equal(t, int64(transferWorkers*transfersEach), decodeCounter(t, mustGet(t, tr, transfers)), "every transfer must be applied exactly once")
}
