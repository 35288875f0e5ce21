// Package tuplediff holds only tests: a differential test of fdbqueue's
// pure-Go tuple codec (package tuple, and the root package's Subspace)
// against FoundationDB's official Go binding (fdb/tuple, fdb/subspace and
// fdb.Strinc/fdb.PrefixRange). Both must pack every tuple to the same bytes,
// read each other's bytes back to the same values, order tuples as their
// packings order, and agree on ranges and on which encodings are invalid;
// every difference the tests allow is listed, with its reason, in the test
// that allows it.
//
// It is a package of its own because the binding's PackWithVersionstamp
// needs an API version selected, which is process-wide and once only, while
// fdbkv's own tests check behaviour with none selected. Against the stub
// libfdb_c (make fdbkv-check) the tests set FDBCSTUB_SELECT_API_VERSION=1,
// which makes the stub accept the selection as a real libfdb_c does.
package tuplediff
