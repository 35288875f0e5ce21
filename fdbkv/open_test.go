package fdbkv

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue/kv"
)

// These tests check Open's ownership of its handle (defect 5) without a
// cluster: openOwned takes the binding's open and close functions, and the
// tests pass fakes that count them. The cluster test in adapter_test.go
// checks the same against the real binding.

// fakeBinding counts the handles opened and destroyed.
type fakeBinding struct {
	mu        sync.Mutex
	opened    []string // the connection strings
	destroyed int
}

func (b *fakeBinding) open(connectionString string) (fdb.Database, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.opened = append(b.opened, connectionString)
	return fdb.Database{}, nil
}

func (b *fakeBinding) destroy(fdb.Database) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.destroyed++
}

func (b *fakeBinding) counts() (opened, destroyed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.opened), b.destroyed
}

func writeClusterFile(t *testing.T, contents string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fdb.cluster")
	if err := os.WriteFile(path, []byte(contents), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const testConnectionString = "test:abcdef@127.0.0.1:4500\n"

func TestOpenOwnsOneHandlePerDatabase(t *testing.T) {
	path := writeClusterFile(t, testConnectionString)
	b := &fakeBinding{}
	d1, err := openOwned(path, b.open, b.destroy)
	if err != nil {
		t.Fatalf("openOwned: %v", err)
	}
	d2, err := openOwned(path, b.open, b.destroy)
	if err != nil {
		t.Fatalf("openOwned: %v", err)
	}
	if opened, _ := b.counts(); opened != 2 {
		t.Fatalf("two Opens of one cluster file made %d handles, want 2 (one each, none shared)", opened)
	}
	if b.opened[0] != testConnectionString {
		t.Errorf("the handle was opened with %q, want the cluster file's contents %q", b.opened[0], testConnectionString)
	}

	d1.Close()
	d1.Close()
	if _, destroyed := b.counts(); destroyed != 1 {
		t.Errorf("Close twice destroyed %d handles, want 1", destroyed)
	}
	ctx := t.Context()
	if _, err := d1.CreateTransaction(ctx); !errors.Is(err, ErrClosed) || !errors.Is(err, kv.ErrClientInvalidOp) {
		t.Errorf("CreateTransaction after Close = %v, want ErrClosed (client_invalid_operation)", err)
	}
	if err := d1.Transact(ctx, func(kv.Transaction) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Transact after Close = %v, want ErrClosed", err)
	}
	if err := d1.ReadTransact(ctx, func(kv.ReadTransaction) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadTransact after Close = %v, want ErrClosed", err)
	}
	// d2 is untouched: its handle is its own.
	if _, err := d2.CreateTransaction(ctx); errors.Is(err, ErrClosed) {
		t.Errorf("closing one Database closed another of the same cluster file: %v", err)
	}
	d2.Close()
	if _, destroyed := b.counts(); destroyed != 2 {
		t.Errorf("after closing both, %d handles destroyed, want 2", destroyed)
	}
}

// distinctHandle returns an fdb.Database that differs from the zero value
// but has no C handle behind it, for fakes that must tell handles apart
// without libfdb_c. The binding's fields are unexported, so it sets the
// clusterFile string field through reflect and unsafe; the handle must
// never reach the binding's methods. It skips t if the binding's layout
// has changed.
func distinctHandle(t *testing.T, name string) fdb.Database {
	t.Helper()
	var db fdb.Database
	f := reflect.ValueOf(&db).Elem().FieldByName("clusterFile")
	if !f.IsValid() || f.Kind() != reflect.String {
		t.Skip("fdb.Database has no clusterFile string field in this binding: cannot make a fake handle distinct from the zero value without libfdb_c")
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetString(name)
	if db == (fdb.Database{}) {
		t.Skip("setting fdb.Database.clusterFile did not make it distinct from the zero value")
	}
	return db
}

// TestFDBAfterClose: after Close of a Database made by Open, FDB returns
// the zero fdb.Database, never the handle Close destroyed; a wrapped
// Database keeps returning the application's handle, which it never
// destroys.
func TestFDBAfterClose(t *testing.T) {
	handle := distinctHandle(t, "fake handle")
	var destroyed []fdb.Database
	open := func(string) (fdb.Database, error) { return handle, nil }
	d, err := openOwned(writeClusterFile(t, testConnectionString), open, func(db fdb.Database) { destroyed = append(destroyed, db) })
	if err != nil {
		t.Fatalf("openOwned: %v", err)
	}
	if got := d.FDB(); got != handle {
		t.Errorf("FDB before Close = %+v, want the handle Open made", got)
	}
	d.Close()
	if len(destroyed) != 1 || destroyed[0] != handle {
		t.Fatalf("Close destroyed %+v, want the handle Open made, once", destroyed)
	}
	if got := d.FDB(); got != (fdb.Database{}) {
		t.Errorf("FDB after Close = %+v, the destroyed handle; want the zero fdb.Database", got)
	}
	if _, err := d.CreateTransaction(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateTransaction after Close = %v, want ErrClosed", err)
	}

	appHandle := distinctHandle(t, "application's handle")
	w := Wrap(appHandle)
	w.Close()
	if got := w.FDB(); got != appHandle {
		t.Errorf("FDB of a wrapped Database after Close = %+v, want the application's handle, still open", got)
	}
}

func TestCloseOfWrapNeverDestroys(t *testing.T) {
	d := Wrap(fdb.Database{}) // destroy is nil: calling it would panic
	d.Close()
	d.Close()
	if !d.closed || d.owned {
		t.Errorf("a wrapped Database after Close: closed %v, owned %v; want closed, not owned", d.closed, d.owned)
	}
}

func TestResolveClusterFile(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	exists := func(yes bool) func(string) bool { return func(string) bool { return yes } }
	for _, tc := range []struct {
		name, given string
		env         map[string]string
		local       bool
		want        string
	}{
		{"given", "/x/fdb.cluster", map[string]string{"FDB_CLUSTER_FILE": "/env"}, true, "/x/fdb.cluster"},
		{"environment", "", map[string]string{"FDB_CLUSTER_FILE": "/env"}, true, "/env"},
		{"environment set but empty: no fallback", "", map[string]string{"FDB_CLUSTER_FILE": ""}, true, ""},
		{"working directory", "", nil, true, "fdb.cluster"},
		{"platform default", "", nil, false, "/default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolveClusterFile(tc.given, env(tc.env), exists(tc.local), "/default"); got != tc.want {
				t.Errorf("resolveClusterFile = %q, want %q", got, tc.want)
			}
		})
	}
	none := func(string) string { return "" }
	for goos, want := range map[string]string{
		"linux":   "/etc/foundationdb/fdb.cluster",
		"darwin":  "/usr/local/etc/foundationdb/fdb.cluster",
		"freebsd": "/usr/local/etc/foundationdb/fdb.cluster",
		"windows": `C:\ProgramData\foundationdb\fdb.cluster`,
	} {
		if got := defaultClusterFile(goos, none); got != want {
			t.Errorf("defaultClusterFile(%s) = %q, want %q", goos, got, want)
		}
	}
	programData := func(k string) string {
		if k == "ProgramData" {
			return `D:\Data`
		}
		return ""
	}
	if got := defaultClusterFile("windows", programData); got != `D:\Data\foundationdb\fdb.cluster` {
		t.Errorf("defaultClusterFile(windows) with ProgramData set = %q", got)
	}
}

func TestReadClusterFileErrors(t *testing.T) {
	code := func(err error) int {
		var ke kv.Error
		if errors.As(err, &ke) {
			return ke.Code
		}
		return 0
	}
	missing := filepath.Join(t.TempDir(), "missing.cluster")
	if _, err := readClusterFile(missing); code(err) != 1515 || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want no_cluster_file_found (1515) matching fs.ErrNotExist", err)
	}
	// A file that cannot be opened is no_cluster_file_found too, not
	// io_error: ClusterConnectionFile's constructor
	// (fdbclient/ClusterConnectionFile.actor.cpp) throws it when fileExists,
	// fopen(filename, "rb") in flow/Platform.actor.cpp, fails, whatever the
	// reason. A path through a regular file fails with ENOTDIR (not
	// fs.ErrNotExist), as root too.
	notDir := filepath.Join(writeClusterFile(t, testConnectionString), "fdb.cluster")
	if _, err := readClusterFile(notDir); code(err) != 1515 || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("path through a file: %v, want no_cluster_file_found (1515) keeping the os error", err)
	}
	// FDB_CLUSTER_FILE="" names no file (ClusterConnectionFile's constructor:
	// fileExists("") fails, no_cluster_file_found), not the working directory.
	if _, err := readClusterFile(""); code(err) != 1515 || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("empty path: %v, want no_cluster_file_found (1515) matching fs.ErrNotExist", err)
	}
	t.Setenv(clusterFileEnv, "") // set, to "": no fallback to ./fdb.cluster or the default
	b0 := &fakeBinding{}
	if _, err := openOwned("", b0.open, b0.destroy); code(err) != 1515 {
		t.Errorf("openOwned(\"\") with FDB_CLUSTER_FILE set to \"\": %v, want no_cluster_file_found (1515)", err)
	}
	if opened, _ := b0.counts(); opened != 0 {
		t.Errorf("openOwned with no cluster file opened %d handles", opened)
	}
	if _, err := readClusterFile(writeClusterFile(t, "")); code(err) != 2104 {
		t.Errorf("empty file: %v, want connection_string_invalid (2104)", err)
	}
	// libfdb_c reads up to 60,000 bytes (MAX_CLUSTER_FILE_BYTES).
	atLimit := testConnectionString + "#" + strings.Repeat("x", maxClusterFileBytes-len(testConnectionString)-1)
	if got, err := readClusterFile(writeClusterFile(t, atLimit)); err != nil || got != atLimit {
		t.Errorf("a %d-byte file: %d bytes, %v; want it whole", len(atLimit), len(got), err)
	}
	if _, err := readClusterFile(writeClusterFile(t, atLimit+"x")); code(err) != 1516 {
		t.Errorf("a %d-byte file: %v, want file_too_large (1516)", len(atLimit)+1, err)
	}
	// openOwned passes the reading error on and opens nothing.
	b := &fakeBinding{}
	if _, err := openOwned(missing, b.open, b.destroy); code(err) != 1515 {
		t.Errorf("openOwned of a missing file: %v, want 1515", err)
	}
	if opened, _ := b.counts(); opened != 0 {
		t.Errorf("openOwned of a missing file opened %d handles", opened)
	}
}

func TestOpenTranslatesBindingErrors(t *testing.T) {
	path := writeClusterFile(t, testConnectionString)
	failing := func(string) (fdb.Database, error) { return fdb.Database{}, fdb.Error{Code: 2104} }
	_, err := openOwned(path, failing, nil)
	var ke kv.Error
	var fe fdb.Error
	if !errors.As(err, &ke) || ke.Code != 2104 || !errors.As(err, &fe) {
		t.Errorf("openOwned with the binding failing 2104 = %v, want kv.Error and fdb.Error 2104", err)
	}
	plain := errors.New("network is stopped")
	if _, err := openOwned(path, func(string) (fdb.Database, error) { return fdb.Database{}, plain }, nil); !errors.Is(err, plain) {
		t.Errorf("openOwned with a plain binding error = %v, want it wrapped", err)
	}
	if err := apiVersionError(errors.New("API version 730 is not supported by the installed FoundationDB C library.")); !errors.As(err, &ke) || ke.Code != 2203 {
		t.Errorf("apiVersionError of the binding's plain error = %v, want api_version_not_supported (2203)", err)
	}
}
