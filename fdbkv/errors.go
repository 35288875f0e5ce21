package fdbkv

import (
	"errors"
	"fmt"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue/kv"
)

// MinAPIVersion is the lowest FoundationDB API version fdbkv accepts. The
// kv semantics it implements need:
//
//   - 520: versionstamped keys and values carry a 4-byte offset (before
//     520 a key's was 2 bytes and a value had none: its stamp went first);
//   - 610: the timeout, retry_limit and max_retry_delay options survive
//     OnError (before 610 every retry had to set them again; Reset still
//     clears them);
//   - 620: GetApproximateSize (fdb_transaction_get_approximate_size);
//   - 700: a commit no longer partially resets the transaction, so its read
//     version stays readable after Commit.
//
// 710, the API version of FoundationDB 7.1, is the documented minimum.
// Only 730 is tested (the tests and make integration select the binding's
// version, on FoundationDB 7.3). Note that the Go binding fdbkv is built
// with declares API version 730, so whatever API version the application
// selects, the installed libfdb_c must be 7.3 or later.
const MinAPIVersion = 710

// APIVersionError reports that the FoundationDB API version selected for
// this process is missing or lower than MinAPIVersion. Functions of fdbkv
// that need a selected API version return it, as a *APIVersionError.
type APIVersionError struct {
	// Selected is the API version selected with fdb.APIVersion, or 0 when
	// none has been selected yet.
	Selected int
	// Min is the minimum fdbkv needs (MinAPIVersion).
	Min int
}

// Error says which API version was found and which is needed.
func (e *APIVersionError) Error() string {
	if e.Selected == 0 {
		return fmt.Sprintf("fdbkv: no FoundationDB API version selected: call fdb.APIVersion(v) with v >= %d first, or use fdbkv.OpenWithAPIVersion", e.Min)
	}
	return fmt.Sprintf("fdbkv: FoundationDB API version %d selected, fdbkv needs %d or later", e.Selected, e.Min)
}

// CheckAPIVersion returns nil when the process has selected a FoundationDB
// API version of at least MinAPIVersion (with fdb.APIVersion), and an
// *APIVersionError otherwise. It calls no C function.
func CheckAPIVersion() error {
	v, err := fdb.GetAPIVersion()
	if err != nil {
		return &APIVersionError{Selected: 0, Min: MinAPIVersion}
	}
	if v < MinAPIVersion {
		return &APIVersionError{Selected: v, Min: MinAPIVersion}
	}
	return nil
}

// translateError is the one place where errors of the Go binding become kv
// errors. An fdb.Error (bare or wrapped) becomes an error that matches both
// the kv.Error of the same code (errors.Is(err, kv.ErrNotCommitted),
// errors.As(err, &kvErr)) and the original fdb.Error (errors.As(err,
// &fdbErr)). Errors that already carry a kv.Error, errors without an FDB
// code and nil are returned unchanged. It calls no C function.
func translateError(err error) error {
	if err == nil {
		return nil
	}
	var ke kv.Error
	if errors.As(err, &ke) {
		return err
	}
	var fe fdb.Error
	if !errors.As(err, &fe) {
		return err
	}
	return &fdbError{code: kv.Error{Code: fe.Code}, native: err}
}

// bindingError makes the error of a transactional function run by
// Transact or ReadTransact of an fdbkv transaction recognisable to the
// binding's own retry loop, which retries only errors whose chain holds an
// fdb.Error (retryable in bindings/go/src/fdb/database.go: errors.As(e, &ep)
// with ep an fdb.Error, then onError(ep)). Errors of the binding already
// hold one (translateError keeps it), but the layers also make errors of
// their own that wrap only a kv.Error, e.g. fdbqueue's conflict when the
// stored configuration moved, which wraps kv.ErrNotCommitted. Such an error
// is returned wrapped with an fdb.Error of its kv code, so that
// fdb.Database.Transact retries it as FDB decides for that code; its text,
// its chain (errors.Is with the layer's own sentinel) and its kv code are
// unchanged. Errors that already hold an fdb.Error, errors without a code
// and nil are returned unchanged. It calls no C function.
func bindingError(err error) error {
	if err == nil {
		return nil
	}
	var fe fdb.Error
	if errors.As(err, &fe) {
		return err
	}
	var ke kv.Error
	if !errors.As(err, &ke) {
		return err
	}
	return &layerError{err: err, native: fdb.Error{Code: ke.Code}}
}

// layerError is an error made by a layer, with a kv.Error in its chain but
// no fdb.Error, given the fdb.Error of the same code (see bindingError).
type layerError struct {
	err    error     // the layer's error
	native fdb.Error // of err's kv code
}

// Error is the layer's text (fdb.Error's own would ask libfdb_c).
func (e *layerError) Error() string { return e.err.Error() }

// Unwrap returns the layer's error, then the fdb.Error of its code.
func (e *layerError) Unwrap() []error { return []error{e.err, e.native} }

// errorCode returns the FDB error code carried by err, as a kv.Error or an
// fdb.Error.
func errorCode(err error) (int, bool) {
	var ke kv.Error
	if errors.As(err, &ke) {
		return ke.Code, true
	}
	var fe fdb.Error
	if errors.As(err, &fe) {
		return fe.Code, true
	}
	return 0, false
}

// fdbError is an error of the Go binding, translated: it unwraps to both
// the kv.Error and the binding's own error.
type fdbError struct {
	code   kv.Error
	native error // an fdb.Error, or an error wrapping one
}

// Error uses kv's text for the code when kv names it, e.g.
// "not_committed (1020)". For other codes, and for wrapped errors, it uses
// the binding's text, which asks libfdb_c for the code's description.
func (e *fdbError) Error() string {
	if _, bare := e.native.(fdb.Error); bare {
		if text := e.code.Error(); text != unnamedText(e.code.Code) {
			return text
		}
	}
	return e.native.Error()
}

// unnamedText is kv.Error's text for a code kv has no name for.
func unnamedText(code int) string { return fmt.Sprintf("fdb error %d", code) }

// Unwrap returns the kv.Error and the binding's error.
func (e *fdbError) Unwrap() []error { return []error{e.code, e.native} }

// commitError translates the error of a commit that was sent. Three
// errors may come back while the commit request FDB sent goes on, so the
// commit may still have been applied; they are marked with
// kv.CommitInterrupted, so that kv.MaybeCommitted reports them:
//
//   - transaction_cancelled (1025) and transaction_timed_out (1031): FDB's
//     commit fails with them as soon as the transaction is cancelled or
//     times out (RYWImpl::commit waits on resetPromise || tr.commit(), and
//     ReadYourWritesTransaction::cancel and timebomb set resetPromise;
//     fdbclient/ReadYourWrites.actor.cpp);
//   - used_during_commit (2017): a read or write issued while the commit
//     runs fails, and fails the commit with it
//     (ReadYourWritesTransaction::checkUsedDuringCommit sets resetPromise
//     to used_during_commit; same file), while the native commit already
//     sent goes on. kv documents this for GetRange (kv.ReadTransaction) and
//     kvtest requires kv.MaybeCommitted for it.
//
// FDB's error does not say whether the commit request was sent, so these
// errors are marked, on the safe side, also when FDB failed the commit
// before sending anything: kv.MaybeCommitted then reports true although
// nothing was applied. That is the case of a timeout that fired before
// Commit was called (timebomb set resetPromise, and
// ReadYourWritesTransaction::commit returns its error without calling
// RYWImpl::commit), of a transaction FDB itself left cancelled
// (RYWImpl::onError sets resetPromise to transaction_cancelled when it
// refuses to retry), and of a Commit called again (used_during_commit).
// Only a cancellation by fdbkv (Cancel, or the transaction's context) is
// known not to have sent the commit: txState.commit then never calls FDB
// and reports plain transaction_cancelled.
func commitError(err error) error {
	err = translateError(err)
	if err == nil {
		return nil
	}
	if errors.Is(err, kv.ErrTransactionCancelled) || errors.Is(err, kv.ErrTransactionTimedOut) ||
		errors.Is(err, kv.ErrUsedDuringCommit) {
		return kv.CommitInterrupted(err)
	}
	return err
}

// operationCancelled is FDB's operation_cancelled (1101): the error of a
// future that was cancelled with fdb_future_cancel.
const operationCancelled = 1101

// watchError translates the error of a watch; cancelled says Cancel was
// called on it, and failure is the error of its transaction when fdbkv
// failed it for that (watchState.fail). A watch cancelled by its owner
// fails, as kv documents, with kv.ErrTransactionCancelled, and an
// fdb.Error of that code (FDB itself reports operation_cancelled); one
// failed for its transaction, with failure.
//
// A watch that fails with cluster_version_changed (1039) is reported as
// fired (nil), which kv.Watch.Wait allows ("it may also return nil
// spuriously"): the caller re-reads the key and watches again. Under the
// multi-version client (external client libraries configured, or the
// disable_client_bypass network option; otherwise
// MultiVersionApi::createDatabase returns the local client's database
// itself, whose watches never fail so), MultiVersionTransaction::watch
// returns the watch as an abortableFuture on the transaction's onChange
// (fdbclient/MultiVersionTransaction.actor.cpp);
// when the client switches to a library of another protocol version,
// AbortableSingleAssignmentVar::fire
// (fdbclient/include/fdbclient/MultiVersionAssignmentVars.h) fails the
// pending future with cluster_version_changed, however long after the
// commit, and cancels the old client's watch (cancelCallbacks). No watch
// is left, and the key may have changed unseen: a spurious fire is the
// true answer, where an error would make callers give up on a healthy
// database. (If the watch's transaction had not committed yet, its
// Commit reports the outcome: cluster_version_changed, maybe committed.)
func watchError(err error, cancelled bool, failure error) error {
	if err == nil {
		return nil
	}
	code, ok := errorCode(err)
	if ok && cancelled && (code == operationCancelled || code == kv.ErrTransactionCancelled.Code) {
		// With an fdb.Error of that code in its chain, as every error
		// of the binding keeps one.
		return translateError(fdb.Error{Code: kv.ErrTransactionCancelled.Code})
	}
	if ok && code == operationCancelled && failure != nil {
		return failure
	}
	if ok && code == kv.ErrClusterVersionChanged.Code {
		return nil
	}
	return translateError(err)
}
