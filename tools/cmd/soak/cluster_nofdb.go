//go:build !fdb

package main

import (
	"errors"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

func openCluster(string) (kv.Database, tuple.Tuple, func() error, error) {
	return nil, nil, nil, errors.New("-cluster-file needs a soak built with FoundationDB's client: go run -tags fdb ./cmd/soak -cluster-file ... (cgo, libfdb_c)")
}
