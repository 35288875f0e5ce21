package fdbkv_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue/fdbkv"
	"github.com/fdbqueue/fdbqueue/kv"
)

// Tests that need a cluster find it through FDB_CLUSTER_FILE and skip
// without it, before any call into libfdb_c (so they skip cleanly when the
// test binary is linked against the stub library). The default cluster file
// is deliberately not used: these tests write (under a random prefix) and
// must not run against a cluster nobody pointed them at. With
// FDBKV_REQUIRE_CLUSTER set (make integration, CI), a missing cluster fails
// the tests instead of skipping them.

// testAPIVersion is the API version the tests select: the binding's.
const testAPIVersion = 730

var (
	dbOnce         sync.Once
	dbPath         string
	dbErr          error
	sharedDatabase *fdbkv.Database
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedDatabase != nil {
		sharedDatabase.Close()
	}
	os.Exit(code)
}

// clusterFile returns the cluster file named by FDB_CLUSTER_FILE, or skips
// t (fails it under FDBKV_REQUIRE_CLUSTER).
func clusterFile(t testing.TB) string {
	t.Helper()
	path := os.Getenv("FDB_CLUSTER_FILE")
	if path == "" {
		noCluster(t, "FDB_CLUSTER_FILE is not set")
	}
	if _, err := os.Stat(path); err != nil {
		noCluster(t, fmt.Sprintf("cluster file: %v", err))
	}
	return path
}

func noCluster(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("FDBKV_REQUIRE_CLUSTER") != "" {
		t.Fatalf("no FoundationDB cluster (%s), and FDBKV_REQUIRE_CLUSTER is set", why)
	}
	t.Skipf("no FoundationDB cluster: %s; set FDB_CLUSTER_FILE to run (make integration does)", why)
}

// testDatabase returns the database of the test cluster, opened once per
// test binary and checked to answer within 20 seconds.
func testDatabase(t testing.TB) *fdbkv.Database {
	t.Helper()
	path := clusterFile(t)
	dbOnce.Do(func() {
		db, err := openTestDatabase(path)
		if err != nil {
			hint := ""
			if errors.Is(err, kv.ErrInternal) {
				hint = " (is this test binary linked against the stub libfdb_c of internal/fdbcstub? it fails every call with 4100)"
			}
			dbErr = fmt.Errorf("opening the cluster of %s with API version %d: %w%s", path, testAPIVersion, err, hint)
			return
		}
		sharedDatabase = db
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		dbErr = db.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
			_, err := tr.GetReadVersion().Get()
			return err
		})
		if dbErr != nil {
			dbErr = fmt.Errorf("the cluster of %s did not answer a read-version request: %w", path, dbErr)
		}
	})
	if dbErr != nil {
		t.Fatal(dbErr)
	}
	return sharedDatabase
}

// openTestDatabase selects testAPIVersion and opens the cluster of path.
// With FDBKV_DISABLE_CLIENT_BYPASS set, it first sets the network option
// disable_client_bypass, so that every transaction goes through the
// multi-version client (MultiVersionTransaction,
// fdbclient/MultiVersionTransaction.actor.cpp), as it does in a process
// with external client libraries: without them libfdb_c bypasses it
// (MultiVersionApi::setupNetwork), and the tests would not see its
// behaviour (e.g. OnError of cluster_version_changed).
func openTestDatabase(path string) (*fdbkv.Database, error) {
	if err := fdb.APIVersion(testAPIVersion); err != nil {
		return nil, err
	}
	if os.Getenv("FDBKV_DISABLE_CLIENT_BYPASS") != "" {
		if err := fdb.Options().SetDisableClientBypass(); err != nil {
			return nil, fmt.Errorf("setting disable_client_bypass: %w", err)
		}
	}
	return fdbkv.Open(path)
}

// testPrefix returns a fresh random key prefix (newTestPrefix), and
// registers its clearing when t ends.
func testPrefix(t testing.TB, db *fdbkv.Database) []byte {
	t.Helper()
	prefix := newTestPrefix()
	if err := clearPrefix(db, prefix); err != nil {
		t.Fatalf("clearing the test prefix %q: %v", prefix, err)
	}
	t.Cleanup(func() {
		if err := clearPrefix(db, prefix); err != nil {
			t.Errorf("clearing the test prefix %q: %v", prefix, err)
		}
	})
	return prefix
}

// clearPrefix clears every key that starts with prefix.
func clearPrefix(db *fdbkv.Database, prefix []byte) error {
	end, err := fdb.Strinc(prefix)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return db.Transact(ctx, func(tr kv.Transaction) error {
		tr.ClearRange(kv.KeyRange{Begin: prefix, End: end})
		return nil
	})
}

// testContext is a context that ends with t, or after a minute: a cluster
// that stops answering makes FDB operations wait, not fail.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newTestPrefix returns a fresh random prefix for a test's keys,
// "fq-test/<12 random characters>/": 21 bytes, short enough for
// queuetest's checks of a batch of 65,536 items within the batch budget
// (queuetest.Harness.Prefix), with 60 random bits to keep concurrent runs
// on one cluster apart.
func newTestPrefix() []byte {
	return []byte("fq-test/" + rand.Text()[:12] + "/")
}
