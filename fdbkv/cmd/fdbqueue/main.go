// Command fdbqueue inspects and operates one fdbqueue queue on a
// FoundationDB cluster: stats, peek, list, push, pop, drain and watch; on a
// job queue (--kind jobs), stats, dead, requeue-dead, delete-dead, job (one
// job by ID, in any state), cancel (remove a queued or leased job),
// schedules (the periodic jobs' schedules) and unschedule (remove one).
//
//	fdbqueue stats --queue myapp/jobs [--cluster-file /etc/foundationdb/fdb.cluster]
//	fdbqueue list  --queue myapp/jobs --json --limit 10
//	fdbqueue stats --demo --queue demo/events --layout versionstamp --encoding tuple
//	fdbqueue dead --demo --queue demo/work
//	fdbqueue job --demo --queue demo/work d599bfd5bef0ee993962e6f28af3f987
//	fdbqueue schedules --demo --queue demo/work
//
// --demo works on an in-memory database (memdb) seeded with four queues,
// without a cluster; nothing persists between runs. Without --cluster-file
// the default cluster file is used (FDB_CLUSTER_FILE, else the platform's
// default path, as libfdb_c finds it). Run "fdbqueue help" for the commands.
//
// The commands live in the root module's internal/cli, written against kv;
// this program only opens the database. It links libfdb_c, so it lives in
// the fdbkv module.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/fdbqueue/fdbqueue/fdbkv"
	"github.com/fdbqueue/fdbqueue/internal/cli"
	"github.com/fdbqueue/fdbqueue/kv"
)

// backend opens FoundationDB through fdbkv, or the demo database.
type backend struct {
	clusterFile string
	apiVersion  int
	demo        bool
}

func (b *backend) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&b.clusterFile, "cluster-file", "", "FoundationDB cluster file (empty: the default cluster file)")
	fs.IntVar(&b.apiVersion, "api-version", 730, "FoundationDB API version to select (at least 710)")
	fs.BoolVar(&b.demo, "demo", false, "use an in-memory database with seeded demo queues instead of a cluster")
}

func (b *backend) Open(ctx context.Context) (kv.Database, func(), error) {
	if b.demo {
		db, err := cli.OpenDemo(ctx, nil)
		if err != nil {
			return nil, nil, err
		}
		return db, func() { db.Close() }, nil
	}
	db, err := fdbkv.OpenWithAPIVersion(b.apiVersion, b.clusterFile)
	if err != nil {
		return nil, nil, err
	}
	return db, db.Close, nil
}

func main() {
	// SIGTERM (timeout, systemd, Kubernetes) as ctrl-C: the command settles
	// an operation whose commit may have landed and prints what it removed,
	// rather than dying between the commit and the output.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.Env{
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		Stdin:    os.Stdin,
		Terminal: cli.IsTerminal(os.Stdout),
		Backend:  &backend{},
	})
	stop()
	os.Exit(code)
}
