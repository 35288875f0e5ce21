// Package exampleapp holds the example programs' logic, written against
// kv.Database only, so that the same code runs on the embedded engine
// (examples/workqueue, examples/scheduler, examples/jobs) and on
// FoundationDB (the fdbkv module's cmd/examples, which needs libfdb_c).
package exampleapp
