package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// slowReadDB makes range reads in its read-only transactions take time,
// as FoundationDB's do: each pair read advances clock by perPair, and a
// read that ends more than 5 s after its transaction began fails with
// transaction_too_old (1007). FDB serves a read only at a version the
// storage server still holds (waitForVersion, fdbserver/storageserver.actor.cpp,
// throws transaction_too_old below oldestVersion, which trails the latest
// by MAX_READ_TRANSACTION_LIFE_VERSIONS, 5,000,000 versions: 5 s), and it
// fetches a range in replies of at most 80,000 bytes (REPLY_BYTE_LIMIT,
// fdbclient/ClientKnobs.cpp; WANT_ALL is SERIAL's 80,000 target bytes,
// bindings/c/fdb_c.cpp): 10,000 values of 100 KB are 10,000 round trips
// one after another. memdb answers a range at once, so the time is
// modelled here (1 ms a pair, as the layers' own Len test does). After
// giveUp failures it fails with a non-retryable error, so that a loop that
// would retry forever ends the test instead of hanging it.
type slowReadDB struct {
	kv.Database
	clock   *memdb.ManualClock
	perPair time.Duration
	tooOld  atomic.Int64
	giveUp  int64
}

var errGaveUp = errors.New("slowReadDB: the same read failed with transaction_too_old too many times")

func (d *slowReadDB) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	return d.Database.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
		return fn(&slowReadTx{ReadTransaction: tr, d: d, began: d.clock.Now()})
	})
}

type slowReadTx struct {
	kv.ReadTransaction
	d     *slowReadDB
	began time.Time
}

func (t *slowReadTx) Snapshot() kv.ReadTransaction {
	return &slowReadTx{ReadTransaction: t.ReadTransaction.Snapshot(), d: t.d, began: t.began}
}

func (t *slowReadTx) GetRange(r kv.KeyRange, o kv.RangeOptions) kv.RangeResult {
	return slowRange{RangeResult: t.ReadTransaction.GetRange(r, o), t: t}
}

type slowRange struct {
	kv.RangeResult
	t *slowReadTx
}

func (r slowRange) GetSlice() ([]kv.KeyValue, error) {
	kvs, err := r.RangeResult.GetSlice()
	d := r.t.d
	d.clock.Advance(time.Duration(len(kvs)) * d.perPair)
	if err == nil && d.clock.Now().Sub(r.t.began) > 5*time.Second {
		if d.tooOld.Add(1) > d.giveUp {
			return nil, errGaveUp
		}
		return nil, kv.ErrTransactionTooOld
	}
	return kvs, err
}

// A listing whose page (pageSize keys) takes longer than FDB's 5 s to read
// failed with transaction_too_old, and the read loop retried the same page
// forever: list --limit 0 (and stats' scans of the journal and the staged
// line, through the same pageRange) never finished on a queue of large
// values. A page that runs out of time must be read again smaller.
func TestListPageTooSlowForOneTransaction(t *testing.T) {
	ctx := context.Background()
	clock := memdb.NewManualClock(t0)
	raw := memdb.New(memdb.WithClock(clock), memdb.WithBackoff(time.Microsecond, time.Microsecond))
	t.Cleanup(func() { raw.Close() })
	const n = 12_000 // more than one page: at 1 ms a pair, a full page takes 10 s
	require.Greater(t, n, pageSize)
	q, err := fdbqueue.NewQueue(mustSub(t, "t", "long"))
	require.NoError(t, err)
	for done := 0; done < n; {
		var batch [][]byte
		for i := 0; i < 1000 && done < n; i++ {
			batch = append(batch, []byte(fmt.Sprintf("v%05d", done)))
			done++
		}
		require.NoError(t, q.EnqueueBatch(ctx, raw, batch))
	}
	db := &slowReadDB{Database: raw, clock: clock, perPair: time.Millisecond, giveUp: 20}

	r := runCLI(t, db, nil, "list", "--queue", "t/long", "--json", "--limit", "0")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var items []Item
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &items))
	require.Len(t, items, n)
	for i, it := range items {
		require.Equal(t, fmt.Sprintf("v%05d", i), *it.Value, "item %d", i)
	}
	assert.LessOrEqual(t, db.tooOld.Load(), int64(5), "a page that runs out of time is read again smaller, not the same")
}
