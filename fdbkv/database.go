package fdbkv

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue/kv"
)

// Database is a kv.Database over a FoundationDB database. It is safe for
// concurrent use. Make one with Open, OpenWithAPIVersion or Wrap.
type Database struct {
	db     fdb.Database
	apiErr error // CheckAPIVersion's verdict, fixed once a database exists

	// owned says Open made db for this Database alone, so Close destroys
	// it with destroy (fdb.Database.Close).
	owned   bool
	destroy func(fdb.Database)

	// mu is held for reading while a transaction is created from db and
	// for writing by Close, so no transaction is created from a destroyed
	// handle. It also makes vet flag copies of a Database.
	mu     sync.RWMutex
	closed bool
}

var _ kv.Database = (*Database)(nil)

// ErrClosed is returned by CreateTransaction, Transact and ReadTransact of
// a Database after its Close. It matches kv.ErrClientInvalidOp too.
var ErrClosed = fmt.Errorf("fdbkv: database is closed: %w", kv.ErrClientInvalidOp)

// Open opens the database of the cluster described by clusterFile, with a
// handle that belongs to the returned Database alone: Close destroys it,
// and nothing else can.
//
// The application must first select a FoundationDB API version of at least
// MinAPIVersion with fdb.APIVersion (once per process, before any other
// call of the binding); otherwise Open returns an *APIVersionError without
// calling into libfdb_c. OpenWithAPIVersion does both steps.
//
// clusterFile "" means the default cluster file, found as libfdb_c finds
// it: the file named by the FDB_CLUSTER_FILE environment variable if it is
// set, else ./fdb.cluster if it exists, else the platform's default
// (/etc/foundationdb/fdb.cluster on Linux). A missing file (or
// FDB_CLUSTER_FILE set to "", which names none) fails with
// no_cluster_file_found (1515, matching fs.ErrNotExist too), as does a
// file that cannot be opened for reading (libfdb_c's fileExists), a file over
// 60,000 bytes with file_too_large (1516), an invalid one with
// connection_string_invalid (2104).
//
// Why not fdb.OpenDatabase: the binding caches the handles it returns, one
// per cluster file, and its Close destroys that shared handle, so a Close
// by fdbkv would destroy a handle the application got from
// fdb.OpenDatabase for the same file (and the application's Close would
// destroy fdbkv's). Open therefore reads the cluster file and opens the
// cluster with fdb.OpenWithConnectionString, which the binding does not
// cache. The differences: the file is read once, here; when the cluster's
// coordinators change, the handle follows them in memory but does not
// rewrite the file (a handle opened from the file would); and with the
// multi-version client, only client libraries of API version 720 (7.2) or
// later can open it. Applications that want the binding's own cluster-file
// handle open it with fdb.OpenDatabase and pass it to Wrap.
//
// Each Open makes a new handle, with its own monitoring of the cluster's
// coordinators and proxies and its own caches (Database::createDatabase,
// fdbclient/NativeAPI.actor.cpp, starts monitorProxies for each; the
// network connections themselves are shared per address by the process's
// FlowTransport): open once per process and share the *Database.
func Open(clusterFile string) (*Database, error) {
	if err := CheckAPIVersion(); err != nil {
		return nil, err
	}
	return openOwned(clusterFile, fdb.OpenWithConnectionString, fdb.Database.Close)
}

// openOwned is Open after the API version check, with the binding's
// uncached open and its Close passed in (tests pass fakes).
func openOwned(clusterFile string, open func(connectionString string) (fdb.Database, error),
	destroy func(fdb.Database)) (*Database, error) {
	path := resolveClusterFile(clusterFile, os.LookupEnv, fileExists, defaultClusterFile(runtime.GOOS, os.Getenv))
	contents, err := readClusterFile(path)
	if err != nil {
		return nil, err
	}
	db, err := open(contents)
	if err != nil {
		if _, ok := errorCode(err); !ok {
			// The binding's own checks (e.g. the network was stopped)
			// return errors without a code.
			return nil, fmt.Errorf("fdbkv: opening the cluster of %s: %w", path, err)
		}
		return nil, fmt.Errorf("fdbkv: opening the cluster of %s: %w", path, translateError(err))
	}
	return &Database{db: db, owned: true, destroy: destroy}, nil
}

// clusterFileEnv is the environment variable libfdb_c reads for the default
// cluster file (CLUSTER_FILE_ENV_VAR_NAME,
// fdbclient/include/fdbclient/MonitorLeader.h).
const clusterFileEnv = "FDB_CLUSTER_FILE"

// maxClusterFileBytes is libfdb_c's limit on a cluster file's size
// (MAX_CLUSTER_FILE_BYTES, fdbclient/include/fdbclient/CoordinationInterface.h).
const maxClusterFileBytes = 60000

// Error codes of flow/include/flow/error_definitions.h that Open returns.
const (
	codeNoClusterFileFound      = 1515
	codeFileTooLarge            = 1516
	codeIOError                 = 1510
	codeConnectionStringInvalid = 2104
)

// resolveClusterFile names the cluster file to read for clusterFile, as
// libfdb_c's ClusterConnectionFile::lookupClusterFileName
// (fdbclient/ClusterConnectionFile.actor.cpp) does: a given name; else
// FDB_CLUSTER_FILE when set (even to a missing file: no fallback); else
// ./fdb.cluster when it exists; else the platform default.
func resolveClusterFile(clusterFile string, lookupEnv func(string) (string, bool),
	exists func(string) bool, platformDefault string) string {
	if clusterFile != "" {
		return clusterFile
	}
	if f, ok := lookupEnv(clusterFileEnv); ok {
		return f
	}
	if exists("fdb.cluster") {
		return "fdb.cluster"
	}
	return platformDefault
}

// defaultClusterFile is the platform's default cluster file
// (platform::getDefaultClusterFilePath, flow/Platform.actor.cpp).
func defaultClusterFile(goos string, getenv func(string) string) string {
	switch goos {
	case "windows":
		dir := getenv("ProgramData")
		if dir == "" {
			dir = `C:\ProgramData`
		}
		return dir + `\foundationdb\fdb.cluster`
	case "darwin", "freebsd":
		return "/usr/local/etc/foundationdb/fdb.cluster"
	default:
		return "/etc/foundationdb/fdb.cluster"
	}
}

// fileExists reports whether path names an existing file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readClusterFile returns the contents of the cluster file at path, with
// libfdb_c's errors (ClusterConnectionFile's constructor and readFileBytes,
// flow/Platform.actor.cpp) as kv.Error codes.
//
// A file that cannot be opened for reading, for whatever reason (missing,
// not readable, a path through a non-directory), is no_cluster_file_found
// (1515), as in FDB: the constructor tests the file with fileExists, which
// is fopen(filename, "rb") (flow/Platform.actor.cpp), and throws
// no_cluster_file_found when it fails; io_error is left to a read that
// fails after the open (readFileBytes). The os error stays in the chain
// (errors.Is(err, fs.ErrNotExist), fs.ErrPermission).
//
// An empty path (FDB_CLUSTER_FILE set to "": resolveClusterFile then does
// not fall back, as lookupClusterFileName does not) names no file: FDB's
// constructor finds none (fileExists("") fails) and throws
// no_cluster_file_found (1515). It must not reach filepath.Clean, which
// would make it ".", the working directory, and the read of a directory
// would fail with io_error (1510).
func readClusterFile(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("fdbkv: the cluster file name is empty (is %s set to \"\"?): %w: %w",
			clusterFileEnv, kv.Error{Code: codeNoClusterFileFound}, fs.ErrNotExist)
	}
	f, err := os.Open(filepath.Clean(path))
	if err != nil {
		return "", fmt.Errorf("fdbkv: cluster file %q: %w: %w", path, kv.Error{Code: codeNoClusterFileFound}, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxClusterFileBytes+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("fdbkv: cluster file %q: %w: %w", path, kv.Error{Code: codeIOError}, err)
	case len(b) > maxClusterFileBytes:
		return "", fmt.Errorf("fdbkv: cluster file %q is over %d bytes: %w", path, maxClusterFileBytes, kv.Error{Code: codeFileTooLarge})
	case len(b) == 0:
		// The binding refuses an empty connection string with an error
		// that has no code; FDB's parser would say this.
		return "", fmt.Errorf("fdbkv: cluster file %q is empty: %w", path, kv.Error{Code: codeConnectionStringInvalid})
	}
	return string(b), nil
}

// OpenWithAPIVersion selects FoundationDB API version version (which must be
// at least MinAPIVersion and at most 730, the binding's) and opens the
// database as Open does. The API version can be selected only once per
// process: calling it again with the same version is fine, with another one
// it fails with FDB's api_version_already_set (2201). A version the
// installed libfdb_c does not support fails with api_version_not_supported
// (2203).
func OpenWithAPIVersion(version int, clusterFile string) (*Database, error) {
	if version < MinAPIVersion {
		return nil, &APIVersionError{Selected: version, Min: MinAPIVersion}
	}
	if err := fdb.APIVersion(version); err != nil {
		return nil, apiVersionError(err)
	}
	return Open(clusterFile)
}

// apiVersionError translates an error of fdb.APIVersion. The binding
// reports an unsupported version as a plain error, without its code
// (api_version_not_supported, 2203): it gets one here.
func apiVersionError(err error) error {
	if _, ok := errorCode(err); ok {
		return translateError(err)
	}
	return fmt.Errorf("%w: %w", kv.Error{Code: 2203}, err)
}

// Wrap returns a Database over db, a database the application opened with
// the binding and keeps owning: Close on the result never closes db (close
// it yourself, after the last use of the result). The API version selected
// for the process must be at least MinAPIVersion; if it is not,
// CreateTransaction, Transact and ReadTransact return an *APIVersionError.
func Wrap(db fdb.Database) *Database {
	return &Database{db: db, apiErr: CheckAPIVersion()}
}

// FDB returns the underlying fdb.Database, e.g. to set database options.
// Do not close it: it belongs to Open's Database, or to the application
// that passed it to Wrap.
//
// After Close of a Database made by Open or OpenWithAPIVersion, whose
// Close destroyed the handle (fdb_database_destroy), FDB returns the zero
// fdb.Database: it has no C handle, and using it fails in Go (the
// binding's methods dereference its nil pointer and panic) instead of
// handing a freed handle to libfdb_c. A handle FDB returned before Close
// must not be used after it. For a Database made by Wrap, FDB keeps
// returning the application's handle, which Close leaves open.
func (d *Database) FDB() fdb.Database {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.db
}

// Close ends d: CreateTransaction, Transact and ReadTransact then return
// ErrClosed. For a Database made by Open or OpenWithAPIVersion it also
// destroys the fdb.Database handle (fdb.Database.Close), which belongs to
// d alone, and FDB returns the zero fdb.Database from then on; for one
// made by Wrap it leaves the application's handle open. Transactions
// created before Close stay usable until they end (libfdb_c keeps the
// database alive for them). Later calls do nothing.
func (d *Database) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	if d.owned {
		d.destroy(d.db)
		d.db = fdb.Database{} // destroyed: FDB must not hand it out
	}
}

// CreateTransaction creates a transaction (fdb.Database.CreateTransaction)
// bound to ctx: when ctx ends, the transaction is cancelled. It returns
// ctx.Err() if ctx has already ended. Most code should use Transact. Keep
// the transaction while you use its futures: once it is unreachable, ctx
// no longer cancels it, and a pending read then ignores ctx.
func (d *Database) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	t, _, err := d.createTransaction(orBackground(ctx))
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Transact runs fn in a new transaction with kv.RetryLoop: it commits, and
// retries retryable errors after fdb's OnError backoff. When ctx ends, the
// transaction is cancelled and Transact returns an error matching
// ctx.Err().
func (d *Database) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	ctx = orBackground(ctx)
	t, stop, err := d.createTransaction(ctx)
	if err != nil {
		return err
	}
	defer stop()
	return kv.RetryLoop(ctx, t, fn)
}

// ReadTransact runs fn in a new transaction with kv.ReadRetryLoop; nothing
// is committed.
func (d *Database) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	ctx = orBackground(ctx)
	t, stop, err := d.createTransaction(ctx)
	if err != nil {
		return err
	}
	defer stop()
	return kv.ReadRetryLoop(ctx, t, fn)
}

// createTransaction creates a transaction cancelled when ctx ends, and the
// function that stops watching ctx.
//
// The context.AfterFunc registration refers to the transaction's state but
// not to the returned *transaction; a cleanup on the latter deregisters
// it, so a transaction created from a long-lived context and then dropped
// does not stay reachable (and its C memory allocated) until that context
// ends.
func (d *Database) createTransaction(ctx context.Context) (*transaction, func() bool, error) {
	if d.apiErr != nil {
		return nil, nil, d.apiErr
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	ftr, err := d.newFDBTransaction()
	if err != nil {
		return nil, nil, err
	}
	t := newTransaction(ctx, ftr)
	stop := t.state.watchContext()
	runtime.AddCleanup(t, func(stop func() bool) { stop() }, stop)
	return t, stop, nil
}

// newFDBTransaction creates an fdb.Transaction from d's handle, unless d is
// closed (its handle may have been destroyed) or has no handle.
func (d *Database) newFDBTransaction() (fdb.Transaction, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return fdb.Transaction{}, ErrClosed
	}
	if d.db == (fdb.Database{}) {
		// A zero Database (not made by Open or Wrap) has no C handle.
		return fdb.Transaction{}, kv.ErrClientInvalidOp
	}
	ftr, err := d.db.CreateTransaction()
	if err != nil {
		return fdb.Transaction{}, translateError(err)
	}
	return ftr, nil
}

// orBackground is ctx, or context.Background() for a nil one, as memdb
// takes it.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
