package otelcheck

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// A priority queue's counts are the faults it met, one for one: a run of
// pushes and pops, one at a time, under every fault memdb injects
// (commit_unknown_result applied and not, not_committed, a commit's
// transaction_too_old, failing reads and read version requests) counts
// each operation once with its outcome, each commit_unknown_result and
// not_committed once, and each transaction run again once (memdb's
// counters of the same events), with the journal and without it. With
// the journal, every commit that applied with an unknown result is
// followed by an attempt that finds the record (counted as a replay);
// without it there is none. The depth gauge then reads what Len counts:
// the counters moved with the commits that applied, not with the others.
func TestPriorityQueueMetricsUnderFaults(t *testing.T) {
	for _, journal := range []bool{true, false} {
		t.Run(fmt.Sprintf("journal=%v", journal), func(t *testing.T) {
			ctx := context.Background()
			f := memdb.Faults{UnknownApplied: 0.1, UnknownNotApplied: 0.1, NotCommitted: 0.1, TooOld: 0.05, ReadErrors: 0.05, ReadVersionErrors: 0.05}
			db := memdb.New(memdb.WithBackoff(10*time.Microsecond, 100*time.Microsecond), memdb.WithSeed(3), memdb.WithFaults(f))
			defer db.Close()
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			defer mp.Shutdown(ctx)
			opts := []fdbqueue.Option{fdbqueue.WithMeterProvider(mp), fdbqueue.WithQueueName("pqf")}
			if !journal {
				opts = append(opts, fdbqueue.WithoutIdempotency())
			}
			pq, err := fdbqueue.NewPriorityQueue(fdbqueue.SubspaceFromBytes([]byte("pqf")), opts...)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(1, 2))
			ok := map[string]float64{}
			var empty float64
			for i := range 600 {
				op, err := "pop", error(nil)
				switch rng.IntN(5) {
				case 0, 1:
					op, err = "push", pq.Push(ctx, db, []byte(fmt.Sprint(i)), int64(rng.IntN(5)))
				case 2:
					_, err = pq.PopMin(ctx, db)
				case 3:
					_, err = pq.PopMax(ctx, db)
				case 4:
					_, err = pq.PopMinBatch(ctx, db, 1+rng.IntN(4))
				}
				if errors.Is(err, fdbqueue.ErrEmpty) {
					empty++
					continue
				}
				require.NoError(t, err)
				ok[op]++
			}
			st := db.Stats()
			require.Positive(t, st.InjectedUnknownApplied)
			require.Positive(t, st.InjectedReadErrors)
			db.SetFaults(memdb.Faults{})
			n, err := pq.Len(ctx, db)
			require.NoError(t, err)
			reg, err := pq.RegisterGauges(db)
			require.NoError(t, err)
			defer reg.Unregister()
			got := collect(t, reader, "pqf")
			sum := func(name string) float64 {
				return got[name+" fdbqueue.op=push"] + got[name+" fdbqueue.op=pop"]
			}
			require.Equal(t, float64(n), got["fdbqueue.depth"])
			require.Equal(t, ok["push"], got["fdbqueue.operations fdbqueue.op=push fdbqueue.outcome=ok"])
			require.Equal(t, ok["pop"], got["fdbqueue.operations fdbqueue.op=pop fdbqueue.outcome=ok"])
			require.Equal(t, empty, got["fdbqueue.operations fdbqueue.op=pop fdbqueue.outcome=empty"])
			require.Equal(t, float64(st.InjectedUnknownApplied+st.InjectedUnknownNotApplied), sum("fdbqueue.commit_unknown_result"))
			require.Equal(t, float64(st.InjectedNotCommitted+st.Conflicts), sum("fdbqueue.conflicts"))
			require.Equal(t, float64(st.Retries), sum("fdbqueue.retries"))
			if journal {
				require.GreaterOrEqual(t, sum("fdbqueue.journal.replays"), float64(st.InjectedUnknownApplied))
			} else {
				require.Zero(t, sum("fdbqueue.journal.replays"))
			}
		})
	}
}
