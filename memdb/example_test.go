package memdb_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// Two transactions read the same key; the one that commits second
// conflicts, is retried by Transact and then sees the first one's write.
func Example() {
	db := memdb.New(memdb.WithBackoff(time.Microsecond, time.Millisecond))
	defer db.Close()
	ctx := context.Background()

	increment := func(tr kv.Transaction) error {
		v, err := tr.Get([]byte("counter")).Get()
		if err != nil {
			return err
		}
		var n uint64
		if v != nil {
			n = binary.BigEndian.Uint64(v)
		}
		tr.Set([]byte("counter"), binary.BigEndian.AppendUint64(nil, n+1))
		return nil
	}

	slow, _ := db.CreateTransaction(ctx)
	_ = increment(slow)             // reads counter (missing) and buffers 1
	_ = db.Transact(ctx, increment) // commits 1 meanwhile
	err := slow.Commit()
	fmt.Println("slow commit:", err, "retryable:", kv.IsRetryable(err))

	_ = db.Transact(ctx, increment) // a retried increment sees the first one
	n, _ := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) (uint64, error) {
		v, err := tr.Get([]byte("counter")).Get()
		return binary.BigEndian.Uint64(v), err
	})
	fmt.Println("counter:", n, "conflicts:", db.Stats().Conflicts)
	// Output:
	// slow commit: not_committed (1020) retryable: true
	// counter: 2 conflicts: 1
}
