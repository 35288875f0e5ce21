package exampleapp

import (
	"flag"
	"fmt"

	"github.com/fdbqueue/fdbqueue/memdb"
)

// MemdbFlags are the flags the examples on memdb (jobs, workqueue) share:
// the latency model, the share of commits answered commit_unknown_result,
// and -cluster-file, which only points to the fdbkv module.
type MemdbFlags struct {
	Latency     string  // real (a healthy cluster's) or none
	Unknown     float64 // share of commits answered commit_unknown_result
	ClusterFile string  // set: the user wants FoundationDB
}

// AddFlags registers the flags on fs.
func (m *MemdbFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&m.Latency, "latency", "real", "latency model: real (a healthy cluster's) or none")
	fs.Float64Var(&m.Unknown, "unknown", 0.02, "fraction of commits answered commit_unknown_result (half applied)")
	fs.StringVar(&m.ClusterFile, "cluster-file", "", "run against FoundationDB instead: see the fdbkv module")
}

// Check returns an error to print before exiting with status 2 if
// -cluster-file is set (it says how to run the example, name, in the fdbkv
// module) or -latency is neither real nor none.
func (m *MemdbFlags) Check(name string) error {
	if m.ClusterFile != "" {
		return fmt.Errorf("this build runs on the embedded engine only (the root module never links libfdb_c);\n"+
			"for FoundationDB run: cd fdbkv && go run ./cmd/examples %s -cluster-file %s", name, m.ClusterFile)
	}
	switch m.Latency {
	case "real", "none":
		return nil
	}
	return fmt.Errorf("unknown -latency %q (want real or none)", m.Latency)
}

// MemdbOptions returns the options of an example's memdb database: the
// seed, a share unknown of commits answered commit_unknown_result (half of
// them applied), and a real cluster's latencies if latency is set.
func MemdbOptions(seed int64, unknown float64, latency bool) []memdb.Option {
	opts := []memdb.Option{memdb.WithSeed(seed),
		memdb.WithFaults(memdb.Faults{UnknownApplied: unknown / 2, UnknownNotApplied: unknown / 2})}
	if latency {
		opts = append(opts, memdb.WithLatency(memdb.RealCluster))
	}
	return opts
}
