//go:build fdb

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/fdbqueue/fdbqueue/fdbkv"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// openCluster opens FoundationDB through fdbkv (API version 730) and
// returns a fresh random prefix for the seeds, ("fdbqueue-soak", hex), and
// a function that clears the prefix's range and closes the database.
func openCluster(clusterFile string) (kv.Database, tuple.Tuple, func() error, error) {
	db, err := fdbkv.OpenWithAPIVersion(730, clusterFile)
	if err != nil {
		return nil, nil, nil, err
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	prefix := tuple.Tuple{"fdbqueue-soak", hex.EncodeToString(id[:])}
	p, err := prefix.Pack()
	if err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	// Every key of the run starts with p; p ends with the string's 0x00
	// terminator, so the keys lie in [p, p[:len-1]+0x01).
	end := append(p[:len(p)-1:len(p)-1], 0x01)
	clearRun := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		defer db.Close()
		if err := db.Transact(ctx, func(tr kv.Transaction) error {
			tr.ClearRange(kv.KeyRange{Begin: p, End: end})
			return nil
		}); err != nil {
			return fmt.Errorf("clearing the soak's keys %q: %w", p, err)
		}
		return nil
	}
	// Fail now, not in every seed, when the cluster cannot be reached.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
		_, err := tr.Get(p).Get()
		return err
	}); err != nil {
		db.Close()
		return nil, nil, nil, fmt.Errorf("reading from the cluster: %w", err)
	}
	return db, prefix, clearRun, nil
}
