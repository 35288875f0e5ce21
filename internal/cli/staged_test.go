package cli

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// commitNotifier signals after every successful commit of a transaction
// made with CreateTransaction, the way a staged waiter runs its steps.
type commitNotifier struct {
	kv.Database
	committed chan struct{}
}

func (d commitNotifier) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	tr, err := d.Database.CreateTransaction(ctx)
	if err != nil {
		return nil, err
	}
	return notifyTx{tr, d.committed}, nil
}

type notifyTx struct {
	kv.Transaction
	committed chan struct{}
}

func (t notifyTx) Commit() error {
	err := t.Transaction.Commit()
	if err == nil {
		select {
		case t.committed <- struct{}{}:
		default:
		}
	}
	return err
}

func stagedCount(t *testing.T, db kv.Database, a ...string) int64 {
	t.Helper()
	r := runCLI(t, db, nil, append(a, "--json")...)
	if r.code == ExitNoQueue { // nothing stored yet: no request either
		return 0
	}
	require.Equal(t, ExitOK, r.code, r.stderr)
	var st Stats
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	return st.Staged["q"]
}

// A consumer blocked in DequeueWait on an empty staged queue has a request
// in the line: stats counts it (from the documented key layout of the line),
// and not after the consumer got its item.
func TestStatsStagedLine(t *testing.T) {
	db := demoDB(t)
	a := []string{"stats", "--queue", "t/staged", "--layout", "versionstamp"}
	q, err := fdbqueue.NewQueue(mustSub(t, "t", "staged"), fdbqueue.WithVersionstampOrder(),
		fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nd := commitNotifier{db, make(chan struct{}, 1)}
	got := make(chan []byte, 1)
	go func() {
		v, err := q.DequeueWait(ctx, nd)
		assert.NoError(t, err)
		got <- v
	}()
	// Each commit of the waiter is a chance it registered; look after each.
	for stagedCount(t, db, a...) == 0 {
		select {
		case <-nd.committed:
		case <-time.After(time.Minute): // a guard against hanging, not a synchronisation
			t.Fatal("the waiter never committed a registration")
		}
	}
	assert.Equal(t, int64(1), stagedCount(t, db, a...))

	// --staging place: a staged enqueue bumps the signal key the waiter
	// sleeps on; without it the waiter would only notice at its next renewal.
	r := runCLI(t, db, nil, "push", "--queue", "t/staged", "--layout", "versionstamp", "--staging", "place", "hello")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "hello", string(<-got))
	assert.Equal(t, int64(0), stagedCount(t, db, a...))
}
