package memdb_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

func BenchmarkZZDecomp(b *testing.B) {
	value := []byte("a small work item, 32 bytes long")
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	mv := []byte(kv.MetadataVersionKey)
	items := kv.KeyRange{Begin: []byte("q\x00"), End: []byte("q\xff")}
	depth := []byte("q\xffdepth")
	setup := func(b *testing.B) (*memdb.DB, func(uint64) []byte) {
		db := memdb.New()
		buf := make([]byte, 0, 10)
		key := func(n uint64) []byte {
			buf = binary.BigEndian.AppendUint64(append(buf[:0], "q\x00"...), n)
			return buf
		}
		_ = db.Transact(context.Background(), func(tr kv.Transaction) error {
			for n := range uint64(1000) {
				tr.Set(key(n), value)
			}
			return nil
		})
		return db, key
	}
	cases := map[string]func(tr kv.Transaction, k []byte) error{
		"empty": func(tr kv.Transaction, k []byte) error { return nil },
		"set":   func(tr kv.Transaction, k []byte) error { tr.Set(k, value); return nil },
		"get+set": func(tr kv.Transaction, k []byte) error {
			tr.Get(k).Get()
			tr.Set(k, value)
			return nil
		},
		"mv+get+set": func(tr kv.Transaction, k []byte) error {
			tr.Get(mv).Get()
			tr.Get(k).Get()
			tr.Set(k, value)
			return nil
		},
		"range1+set": func(tr kv.Transaction, k []byte) error {
			tr.Snapshot().GetRange(items, kv.RangeOptions{Limit: 1, Reverse: true}).GetSlice()
			tr.Set(k, value)
			return nil
		},
		"range1fwd+set": func(tr kv.Transaction, k []byte) error {
			tr.GetRange(items, kv.RangeOptions{Limit: 1}).GetSlice()
			tr.Set(k, value)
			return nil
		},
		"get+set+add": func(tr kv.Transaction, k []byte) error {
			tr.Get(k).Get()
			tr.Set(k, value)
			tr.Add(depth, one)
			return nil
		},
	}
	for name, f := range cases {
		b.Run(name, func(b *testing.B) {
			db, key := setup(b)
			defer db.Close()
			ctx := context.Background()
			b.ReportAllocs()
			resetTimer(b)
			for i := 0; i < b.N; i++ {
				k := key(uint64(i % 1000))
				if err := db.Transact(ctx, func(tr kv.Transaction) error { return f(tr, k) }); err != nil {
					b.Fatal(err)
				}
			}
			reportOps(b)
		})
	}
}
