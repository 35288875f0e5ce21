package memdb_test

import (
	"context"
	"encoding/binary"
	"runtime"
	"sync"
	"testing"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/require"
)

func TestSetGetClear(t *testing.T) {
	db, _ := newDB(t)
	_, ok := mustGet(t, db, "a")
	require.False(t, ok, "a key never written must not exist")
	mustSet(t, db, "a", "1")
	v, ok := mustGet(t, db, "a")
	require.True(t, ok)
	require.Equal(t, "1", v)
	mustSet(t, db, "empty", "")
	v, ok = mustGet(t, db, "empty")
	require.True(t, ok, "an empty value is a value")
	require.Equal(t, "", v)

	require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
		tr.Clear([]byte("a"))
		return nil
	}))
	_, ok = mustGet(t, db, "a")
	require.False(t, ok)
	require.Equal(t, int64(1), db.Stats().Keys)
}

func TestReturnedValuesAreCopies(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "k", "value")
	tr := newTx(t, db)
	v := get(t, tr, "k")
	v[0] = 'X'
	require.Equal(t, "value", string(get(t, tr, "k")), "mutating a returned value must not change the store")

	key, val := []byte("mine"), []byte("v1")
	tr.Set(key, val)
	key[0], val[0] = 'X', 'X'
	require.Equal(t, "v1", string(get(t, tr, "mine")), "Set must copy its arguments")
}

func TestReadVersionIsLatestCommitted(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	tr.Set([]byte("k"), []byte("v"))
	require.NoError(t, tr.Commit())
	cv, err := tr.GetCommittedVersion()
	require.NoError(t, err)

	tr2 := newTx(t, db)
	rv, err := tr2.GetReadVersion().Get()
	require.NoError(t, err)
	require.Equal(t, cv, rv, "the read version is the latest committed version")
	require.Equal(t, cv, db.Stats().Version)
}

func TestReadsSeeTheReadVersion(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "k", "old")
	tr := newTx(t, db)
	require.Equal(t, "old", string(get(t, tr, "k")))
	mustSet(t, db, "k", "new")
	mustSet(t, db, "k2", "new")
	require.Equal(t, "old", string(get(t, tr, "k")), "a transaction keeps reading at its read version")
	require.Nil(t, get(t, tr, "k2"), "a key created after the read version is invisible")
	kvs, err := tr.GetRange(rng("", "\xff"), kv.RangeOptions{}).GetSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"k"}, keys(kvs))
}

func TestConflictOnReadKeyWrittenLater(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "k", "0")
	tr := newTx(t, db)
	get(t, tr, "k")
	mustSet(t, db, "k", "1")
	tr.Set([]byte("other"), []byte("x"))
	err := tr.Commit()
	require.ErrorIs(t, err, kv.ErrNotCommitted)
	require.True(t, kv.IsRetryable(err))
	require.Equal(t, int64(1), db.Stats().Conflicts)
	_, ok := mustGet(t, db, "other")
	require.False(t, ok, "a conflicting commit applies nothing")
}

func TestWriteWriteDoesNotConflict(t *testing.T) {
	db, _ := newDB(t)
	t1, t2 := newTx(t, db), newTx(t, db)
	get(t, t1, "unrelated")
	get(t, t2, "unrelated2")
	t1.Set([]byte("k"), []byte("1"))
	t2.Set([]byte("k"), []byte("2"))
	require.NoError(t, t1.Commit())
	require.NoError(t, t2.Commit(), "blind writes to the same key never conflict")
	v, _ := mustGet(t, db, "k")
	require.Equal(t, "2", v, "the later commit wins")
}

func TestReadOnlyAlwaysCommits(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	get(t, tr, "k")
	mustSet(t, db, "k", "1")
	require.NoError(t, tr.Commit(), "a read-only transaction always commits")
	cv, err := tr.GetCommittedVersion()
	require.NoError(t, err)
	require.Equal(t, int64(-1), cv)
	require.Equal(t, int64(1), db.Stats().ReadOnlyCommits)
}

func TestCounterReadModifyWriteConflicts(t *testing.T) {
	db, _ := newDB(t)
	const workers, each = 32, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				_, err := kv.Transact(context.Background(), db, func(tr kv.Transaction) (struct{}, error) {
					v, err := tr.Get([]byte("counter")).Get()
					if err != nil {
						return struct{}{}, err
					}
					var n uint64
					if v != nil {
						n = binary.BigEndian.Uint64(v)
					}
					// The client's round trip: without it a transaction
					// can run start to commit within one time slice, and
					// with few CPUs the goroutines might never overlap.
					runtime.Gosched()
					tr.Set([]byte("counter"), binary.BigEndian.AppendUint64(nil, n+1))
					return struct{}{}, nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	v, ok := mustGet(t, db, "counter")
	require.True(t, ok)
	require.Equal(t, uint64(workers*each), binary.BigEndian.Uint64([]byte(v)), "read-modify-write must not lose increments")
	st := db.Stats()
	require.Greater(t, st.Conflicts, int64(0), "32 goroutines on one key must conflict")
	require.Equal(t, st.Conflicts, st.Retries, "each conflict is retried once by the loop")
}

func TestCounterAtomicAddNeverConflicts(t *testing.T) {
	db, _ := newDB(t)
	const workers, each = 32, 50
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				err := db.Transact(context.Background(), func(tr kv.Transaction) error {
					tr.Add([]byte("counter"), le64(1))
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	v, _ := mustGet(t, db, "counter")
	require.Equal(t, uint64(workers*each), binary.LittleEndian.Uint64([]byte(v)))
	require.Equal(t, int64(0), db.Stats().Conflicts, "atomic adds add no read conflicts")
}

var _ kv.Database = (*memdb.DB)(nil)
