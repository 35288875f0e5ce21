package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// residue lists the pairs of a structure's meta subspace (prefix+0xff: its
// journal records, staged requests and results) whose values hold one of
// the items ids, each with the items it holds, and the staging keys left
// (requests still in the line, results and markers). A failing history ends with
// it, so that an item a take kept (in a journal record under the take's
// operation ID, or in a staged result) can be told from one that was never
// written. An item is found by its ID's 8 bytes as a value begins (values.go),
// raw or as the tuple encoding escapes them (each 0x00 as 0x00 0xff).
func residue(ctx context.Context, db kv.Database, prefix []byte, ids []uint64) ([]string, error) {
	meta := append(bytes.Clone(prefix), 0xff)
	r := kv.KeyRange{Begin: meta, End: append(bytes.Clone(meta), 0xff)}
	kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{Mode: kv.StreamingModeWantAll}).GetSlice()
	})
	if err != nil {
		return nil, err
	}
	type pattern struct {
		id        uint64
		raw, tupl []byte
	}
	pats := make([]pattern, 0, len(ids))
	for _, id := range ids {
		raw := binary.BigEndian.AppendUint64(nil, id)
		pats = append(pats, pattern{id, raw, bytes.ReplaceAll(raw, []byte{0}, []byte{0, 0xff})})
	}
	var out []string
	for _, p := range kvs {
		var held []uint64
		for _, pt := range pats {
			if bytes.Contains(p.Value, pt.raw) || bytes.Contains(p.Value, pt.tupl) {
				held = append(held, pt.id)
			}
		}
		if len(held) == 0 {
			// A staged request or an empty result (its marker) holds no
			// item, but one left in the line makes takes outside it skip
			// the item at its place: listed too. The signal key is not.
			if t, err := tuple.Unpack(p.Key[len(meta):]); err == nil && len(t) > 1 && t[0] == "s" && t[1] != "sig" {
				out = append(out, fmt.Sprintf("%s (%d bytes) holds no item", describeMetaKey(p.Key[len(meta):]), len(p.Value)))
			}
			continue
		}
		slices.Sort(held)
		out = append(out, fmt.Sprintf("%s (%d bytes) holds %v", describeMetaKey(p.Key[len(meta):]), len(p.Value), held))
	}
	return out, nil
}

// describeMetaKey shows a key of the meta subspace as its tuple, or in hex
// when it is not one (a chunk of a chunked value, say).
func describeMetaKey(k []byte) string {
	if t, err := tuple.Unpack(k); err == nil {
		return fmt.Sprintf("%v", t)
	}
	return fmt.Sprintf("%x", k)
}
