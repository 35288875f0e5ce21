package fdbqueue_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// Tests of defect 1 (issue 12): anything a write accepts, every later step
// (a pop, its journal record, a staged result, a give-back) must be able to
// store. A journal record or a result that packed the stored value in a
// tuple escaped every 0x00 byte, so a 60 KB zero-filled value made every
// PopMin fail with value_too_large (2103) forever.

// limitValue is a value of the largest size an encoding accepts.
type limitValue struct {
	name string
	v    []byte
}

// limitValues returns all-zero and all-0xff values whose stored form is
// exactly kv.MaxValueSize bytes under enc, and a value one byte longer of
// each, which must be rejected.
func limitValues(enc fdbqueue.ValueEncoding) (ok, tooLarge []limitValue) {
	zeros, ffs := kv.MaxValueSize, kv.MaxValueSize
	if enc == fdbqueue.TupleValues {
		// (item,) packs as 01, the bytes with each 00 escaped as 00 ff, 00.
		zeros, ffs = (kv.MaxValueSize-2)/2, kv.MaxValueSize-2
	}
	return []limitValue{{"zeros", make([]byte, zeros)}, {"0xff", bytes.Repeat([]byte{0xff}, ffs)}},
		[]limitValue{{"zeros+1", make([]byte, zeros+1)}, {"0xff+1", bytes.Repeat([]byte{0xff}, ffs+1)}}
}

var encodings = []struct {
	name string
	enc  fdbqueue.ValueEncoding
}{{"raw", fdbqueue.RawValues}, {"tuple", fdbqueue.TupleValues}}

var journalModes = []struct {
	name string
	opts []fdbqueue.Option
}{{"journal", nil}, {"nojournal", []fdbqueue.Option{fdbqueue.WithoutIdempotency()}}}

// forValueModes runs f for each encoding and journal mode, with the
// options of that mode.
func forValueModes(t *testing.T, f func(t *testing.T, enc fdbqueue.ValueEncoding, journal bool, opts []fdbqueue.Option)) {
	for _, e := range encodings {
		for _, j := range journalModes {
			t.Run(e.name+"/"+j.name, func(t *testing.T) {
				opts := append([]fdbqueue.Option{fdbqueue.WithValueEncoding(e.enc)}, j.opts...)
				f(t, e.enc, j.opts == nil, opts)
			})
		}
	}
}

func TestLimitValuesQueue(t *testing.T) {
	for _, layout := range []struct {
		name string
		opts []fdbqueue.Option
	}{{"index", nil}, {"versionstamp", []fdbqueue.Option{fdbqueue.WithVersionstampOrder()}}} {
		t.Run(layout.name, func(t *testing.T) {
			forValueModes(t, func(t *testing.T, enc fdbqueue.ValueEncoding, journal bool, opts []fdbqueue.Option) {
				ctx := context.Background()
				db := newDB(t)
				q := mustQueue(t, "limit", append(opts, layout.opts...)...)
				ok, tooLarge := limitValues(enc)
				for _, v := range tooLarge {
					err := q.Enqueue(ctx, db, v.v)
					require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge, v.name)
					require.ErrorIs(t, err, kv.ErrValueTooLarge, v.name)
					require.Regexp(t, `10000[12] (bytes )?stored.*limit 100000`, err.Error(), "the error gives the stored size")
					if enc == fdbqueue.TupleValues {
						require.Contains(t, err.Error(), "packed tuple", "the error says why the stored form is larger")
					}
				}
				for _, v := range ok {
					// One at a time, the second under an applied
					// commit_unknown_result (with the journal, the retry
					// replays the record, which holds the value).
					require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{v.v, v.v}), v.name)
					got, err := q.Dequeue(ctx, db)
					require.NoError(t, err, v.name)
					require.Equal(t, v.v, got, v.name)
					if journal {
						db.FailNextCommit(kv.ErrCommitUnknownResult, true)
					}
					got, err = q.Dequeue(ctx, db)
					require.NoError(t, err, v.name)
					require.Equal(t, v.v, got, v.name)

					// In a batch, and inside a caller's transaction with
					// its own ID (journaled there too).
					require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{v.v, v.v, v.v}), v.name)
					if journal {
						db.FailNextCommit(kv.ErrCommitUnknownResult, true)
					}
					vals, err := q.DequeueBatch(ctx, db, 2)
					require.NoError(t, err, v.name)
					require.Equal(t, [][]byte{v.v, v.v}, vals, v.name)
					id := fdbqueue.NewOpID()
					got, err = kv.Transact(ctx, db, func(tr kv.Transaction) ([]byte, error) {
						return q.Dequeue(ctx, tr, fdbqueue.WithOpID(id))
					})
					require.NoError(t, err, v.name)
					require.Equal(t, v.v, got, v.name)
				}
				empty, err := q.Empty(ctx, db)
				require.NoError(t, err)
				require.True(t, empty, "every item was removed exactly once")
			})
		})
	}
}

func TestLimitValuesPriorityQueue(t *testing.T) {
	forValueModes(t, func(t *testing.T, enc fdbqueue.ValueEncoding, journal bool, opts []fdbqueue.Option) {
		ctx := context.Background()
		db := newDB(t)
		pq := mustPQ(t, "limit", opts...)
		ok, tooLarge := limitValues(enc)
		for _, v := range tooLarge {
			err := pq.Push(ctx, db, v.v, 1)
			require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge, v.name)
			require.ErrorIs(t, err, kv.ErrValueTooLarge, v.name)
		}
		pops := []struct {
			name string
			pop  func() ([]fdbqueue.Item, error)
			n    int
		}{
			{"PopMin", func() ([]fdbqueue.Item, error) { it, err := pq.PopMin(ctx, db); return []fdbqueue.Item{it}, err }, 1},
			{"PopMax", func() ([]fdbqueue.Item, error) { it, err := pq.PopMax(ctx, db); return []fdbqueue.Item{it}, err }, 1},
			{"PopMinBatch", func() ([]fdbqueue.Item, error) { return pq.PopMinBatch(ctx, db, 2) }, 2},
			{"PopMaxBatch", func() ([]fdbqueue.Item, error) { return pq.PopMaxBatch(ctx, db, 2) }, 2},
		}
		for _, v := range ok {
			for _, p := range pops {
				for _, unknown := range []bool{false, true} {
					if unknown && !journal {
						continue
					}
					name := fmt.Sprintf("%s/%s/unknown=%v", v.name, p.name, unknown)
					for range p.n {
						require.NoError(t, pq.Push(ctx, db, v.v, -7), name)
					}
					if unknown {
						db.FailNextCommit(kv.ErrCommitUnknownResult, true)
					}
					items, err := p.pop()
					require.NoError(t, err, name)
					require.Len(t, items, p.n, name)
					for _, it := range items {
						require.Equal(t, fdbqueue.Item{Value: v.v, Priority: -7}, it, name)
					}
				}
			}
		}
		empty, err := pq.Empty(ctx, db)
		require.NoError(t, err)
		require.True(t, empty, "every item was removed exactly once")
	})
}

// A staged result (an item handed to a waiting request) holds the item's
// key and stored value; both serving modes, collected or given back when
// the waiter's call fails.
func TestLimitValuesStaged(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		forValueModes(t, func(t *testing.T, enc fdbqueue.ValueEncoding, journal bool, opts []fdbqueue.Option) {
			ok, _ := limitValues(enc)
			for _, v := range ok {
				for _, giveUp := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/giveUp=%v", v.name, giveUp), func(t *testing.T) {
						ctx := context.Background()
						db := stgDB(t)
						sub := stgSubspace(t, "limit")
						q := stgQueue(t, sub, append(opts, m.opts(fdbqueue.StagingConfig{})...)...)
						plain := stgQueue(t, sub, append(opts, m.layout())...) // no staging options; runs in the hook, before the waiter sleeps
						wctx, cancel := context.WithCancel(ctx)
						defer cancel()
						var itemKey []byte
						fdbqueue.SetStagingHook(q, func(p string) {
							if p != "armed" || itemKey != nil {
								return
							}
							require.NoError(t, plain.Enqueue(ctx, db, v.v))
							itemKey = itemKeys(t, db, sub)[0]
							n, err := fdbqueue.FulfilStaged(ctx, db, q)
							require.NoError(t, err)
							require.Equal(t, 1, n, "the waiter's request is served: its result holds the value")
							if giveUp {
								cancel()
							}
						})
						got, err := q.DequeueWait(wctx, db)
						if giveUp {
							require.ErrorIs(t, err, context.Canceled)
							m.requireReturned(t, db, sub, itemKey)
							got, err = q.Dequeue(ctx, db)
						}
						require.NoError(t, err)
						require.Equal(t, v.v, got)
						require.Empty(t, stagingKeys(t, db, sub))
						require.Empty(t, itemKeys(t, db, sub))
						requireNoWatches(t, db)
					})
				}
			}
		})
	})
}

// A take whose commit applied but was reported interrupted, by a call
// whose context then ended: the cleanup finds the take in the journal (a
// record holding the limit-sized value) and gives the item back.
func TestLimitValuesStagedInterruptedTake(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		forValueModes(t, func(t *testing.T, enc fdbqueue.ValueEncoding, journal bool, opts []fdbqueue.Option) {
			if !journal {
				return // without the journal, the cleanup cannot know the take applied
			}
			ok, _ := limitValues(enc)
			for _, v := range ok {
				t.Run(v.name, func(t *testing.T) {
					ctx := context.Background()
					db := stgDB(t)
					sub := stgSubspace(t, "limit-take")
					q := stgQueue(t, sub, append(opts, m.opts(fdbqueue.StagingConfig{})...)...)
					require.NoError(t, q.Enqueue(ctx, db, v.v))
					before := itemKeys(t, db, sub)
					wctx, cancel := context.WithCancel(ctx)
					defer cancel()
					fdbqueue.SetStagingHook(q, func(p string) {
						switch p {
						case "taking":
							db.FailNextCommit(kv.CommitInterrupted(kv.ErrTransactionCancelled), true)
						case "failed":
							cancel()
						}
					})
					_, err := q.Dequeue(wctx, db)
					require.ErrorIs(t, err, context.Canceled)
					require.False(t, kv.MaybeCommitted(err), "the cleanup settled the outcome: %v", err)
					m.requireReturned(t, db, sub, before[0])
					fdbqueue.SetStagingHook(q, nil)
					got, err := q.Dequeue(ctx, db)
					require.NoError(t, err)
					require.Equal(t, v.v, got, "the item went back intact")
				})
			}
		})
	})
}

// The same for a staged PopMin: its journal record (priority and value) is
// longer than the value limit, so it is written in two chunks.
func TestLimitValuesStagedInterruptedPop(t *testing.T) {
	for _, e := range encodings {
		ok, _ := limitValues(e.enc)
		for _, v := range ok {
			t.Run(e.name+"/"+v.name, func(t *testing.T) {
				ctx := context.Background()
				db := stgDB(t)
				sub := stgSubspace(t, "limit-pop")
				pq, err := fdbqueue.NewPriorityQueue(sub, fdbqueue.WithValueEncoding(e.enc), fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
				require.NoError(t, err)
				require.NoError(t, pq.Push(ctx, db, v.v, 9))
				before := itemKeys(t, db, sub)
				wctx, cancel := context.WithCancel(ctx)
				defer cancel()
				fdbqueue.SetPQStagingHook(pq, func(p string) {
					switch p {
					case "taking":
						db.FailNextCommit(kv.CommitInterrupted(kv.ErrTransactionCancelled), true)
					case "failed":
						cancel()
					}
				})
				_, err = pq.PopMin(wctx, db)
				require.ErrorIs(t, err, context.Canceled)
				require.False(t, kv.MaybeCommitted(err), "the cleanup settled the outcome: %v", err)
				require.Equal(t, before, itemKeys(t, db, sub), "the item is back at its key")
				fdbqueue.SetPQStagingHook(pq, nil)
				got, err := pq.PopMin(ctx, db)
				require.NoError(t, err)
				require.Equal(t, fdbqueue.Item{Value: v.v, Priority: 9}, got)
			})
		}
	}
}

// The same for a PriorityQueue (always served in batches), PopMin and
// PopMax requests.
func TestLimitValuesStagedPop(t *testing.T) {
	forValueModes(t, func(t *testing.T, enc fdbqueue.ValueEncoding, journal bool, opts []fdbqueue.Option) {
		ok, _ := limitValues(enc)
		for _, v := range ok {
			for _, max := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/max=%v", v.name, max), func(t *testing.T) {
					ctx := context.Background()
					db := stgDB(t)
					sub := stgSubspace(t, "limitpq")
					pq, err := fdbqueue.NewPriorityQueue(sub, append(opts, fdbqueue.WithStaging(fdbqueue.StagingConfig{}))...)
					require.NoError(t, err)
					plain, err := fdbqueue.NewPriorityQueue(sub, opts...)
					require.NoError(t, err)
					served := false
					fdbqueue.SetPQStagingHook(pq, func(p string) {
						if p != "armed" || served {
							return
						}
						served = true
						require.NoError(t, plain.Push(ctx, db, v.v, 3))
						n, err := fdbqueue.FulfilStagedPQ(ctx, db, pq, max)
						require.NoError(t, err)
						require.Equal(t, 1, n)
					})
					wait := pq.PopMinWait
					if max {
						wait = pq.PopMaxWait
					}
					got, err := wait(ctx, db)
					require.NoError(t, err)
					require.Equal(t, fdbqueue.Item{Value: v.v, Priority: 3}, got)
					require.Empty(t, stagingKeys(t, db, sub))
					requireNoWatches(t, db)
				})
			}
		}
	})
}
