package exampleapp

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// RunJobs keeps every key it writes under the subspace it is given (the
// FoundationDB program clears exactly that subspace when it ends), and
// accounts for every job.
func TestRunJobsStaysInSubspace(t *testing.T) {
	db := memdb.New(memdb.WithSeed(5), memdb.WithFaults(memdb.Faults{UnknownApplied: 0.03, UnknownNotApplied: 0.03}))
	defer db.Close()
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"fdbqueue-examples", "jobs", "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var cfg JobsConfig
	fs := flag.NewFlagSet("jobs", flag.ContinueOnError)
	cfg.AddFlags(fs)
	if err := fs.Parse([]string{"-jobs", "120", "-lease", "100ms", "-max-delay", "20ms", "-fail", "0.3", "-max-attempts", "2", "-seed", "5"}); err != nil {
		t.Fatal(err)
	}
	s, err := RunJobs(ctx, db, sub, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil || s.Added != 120 || s.Done+s.Dead != 120 {
		t.Fatalf("want 120 jobs done or dead, none lost or duplicated: %+v (%v)", s, err)
	}
	if s.Dead == 0 || s.Retried == 0 {
		t.Fatalf("with 30%% failures and 2 attempts, some jobs retry and some die: %+v", s)
	}
	kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(kv.KeyRange{Begin: []byte{}, End: []byte{0xff}}, kv.RangeOptions{}).GetSlice()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) == 0 {
		t.Fatal("the run left no effects")
	}
	for _, p := range kvs {
		if !sub.Contains(p.Key) {
			t.Fatalf("key %q is outside the run's subspace", p.Key)
		}
	}
}

func TestJobsSummaryCheck(t *testing.T) {
	if (JobsSummary{Added: 3, Done: 2, Dead: 1}).Check() != nil {
		t.Error("a clean run fails Check")
	}
	if (JobsSummary{Added: 3, Done: 2, Lost: 1}).Check() == nil || (JobsSummary{Added: 3, Done: 3, Duplicates: 1}).Check() == nil {
		t.Error("a lost job or a duplicate effect passes Check")
	}
}
