package fdbkv

import (
	"context"
	"runtime"
	"sync"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue/kv"
)

// Database is a kv.Database over a FoundationDB database. It is safe for
// concurrent use. Make one with Open, OpenWithAPIVersion or Wrap.
type Database struct {
	db     fdb.Database
	apiErr error     // CheckAPIVersion's verdict, fixed once a database exists
	shared *sharedDB // set when Open made the fdb.Database
	closed sync.Once // Close releases shared only once; also makes vet flag copies
}

var _ kv.Database = (*Database)(nil)

// sharedDB is one fdb.Database opened by Open and the number of open
// Databases using it. The binding caches databases by cluster file and
// fdb.Database.Close destroys the cached one, so Open shares them and closes
// one only when its last user closes.
type sharedDB struct {
	clusterFile string
	db          fdb.Database
	refs        int
}

var (
	openMu sync.Mutex
	opened = map[string]*sharedDB{}
)

// Open opens the database of the cluster described by clusterFile ("" for
// FoundationDB's default cluster file).
//
// The application must first select a FoundationDB API version of at least
// MinAPIVersion with fdb.APIVersion (once per process, before any other
// call of the binding); otherwise Open returns an *APIVersionError without
// calling into libfdb_c. OpenWithAPIVersion does both steps.
//
// Databases opened here for the same cluster file share one fdb.Database,
// which is closed when the last of them is closed. Do not also open that
// cluster file with fdb.OpenDatabase and close it yourself: the binding
// caches databases per cluster file, so that would close this one too (use
// Wrap for a database you manage).
func Open(clusterFile string) (*Database, error) {
	if err := CheckAPIVersion(); err != nil {
		return nil, err
	}
	openMu.Lock()
	defer openMu.Unlock()
	s := opened[clusterFile]
	if s == nil {
		db, err := fdb.OpenDatabase(clusterFile)
		if err != nil {
			return nil, translateError(err)
		}
		s = &sharedDB{clusterFile: clusterFile, db: db}
		opened[clusterFile] = s
	}
	s.refs++
	return &Database{db: s.db, shared: s}, nil
}

// OpenWithAPIVersion selects FoundationDB API version version (which must be
// at least MinAPIVersion and at most 730, the binding's) and opens the
// database as Open does. The API version can be selected only once per
// process: calling it again with the same version is fine, with another one
// it fails with FDB's api_version_already_set (2201).
func OpenWithAPIVersion(version int, clusterFile string) (*Database, error) {
	if version < MinAPIVersion {
		return nil, &APIVersionError{Selected: version, Min: MinAPIVersion}
	}
	if err := fdb.APIVersion(version); err != nil {
		return nil, translateError(err)
	}
	return Open(clusterFile)
}

// Wrap returns a Database over db, a database the application opened with
// the binding and keeps managing: Close on the result does not close db.
// The API version selected for the process must be at least MinAPIVersion;
// if it is not, CreateTransaction, Transact and ReadTransact return an
// *APIVersionError.
func Wrap(db fdb.Database) *Database {
	return &Database{db: db, apiErr: CheckAPIVersion()}
}

// FDB returns the underlying fdb.Database, e.g. to set database options.
func (d *Database) FDB() fdb.Database { return d.db }

// Close releases a database made by Open or OpenWithAPIVersion (the
// underlying fdb.Database is closed when no other Database opened for the
// same cluster file remains). It does nothing for a database made by Wrap,
// and nothing on later calls. Transactions must not be used after Close.
func (d *Database) Close() {
	d.closed.Do(func() {
		if d.shared == nil {
			return
		}
		openMu.Lock()
		defer openMu.Unlock()
		d.shared.refs--
		if d.shared.refs == 0 {
			delete(opened, d.shared.clusterFile)
			d.shared.db.Close()
		}
	})
}

// CreateTransaction creates a transaction (fdb.Database.CreateTransaction)
// bound to ctx: when ctx ends, the transaction is cancelled. It returns
// ctx.Err() if ctx has already ended. Most code should use Transact.
func (d *Database) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	t, _, err := d.createTransaction(ctx)
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
// not to the returned *transaction; a cleanup on the latter deregisters it, so
// a transaction created from a long-lived context and then dropped does not
// stay reachable (and its C memory allocated) until that context ends.
func (d *Database) createTransaction(ctx context.Context) (*transaction, func() bool, error) {
	if d.apiErr != nil {
		return nil, nil, d.apiErr
	}
	if d.db == (fdb.Database{}) {
		// A zero Database (not made by Open or Wrap) has no C handle.
		return nil, nil, kv.ErrClientInvalidOp
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	ftr, err := d.db.CreateTransaction()
	if err != nil {
		return nil, nil, translateError(err)
	}
	t := newTransaction(ctx, ftr)
	stop := t.state.watchContext()
	runtime.AddCleanup(t, func(stop func() bool) { stop() }, stop)
	return t, stop, nil
}
