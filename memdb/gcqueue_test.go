package memdb

import (
	"math/rand/v2"
	"testing"
)

// TestGCQueue checks the GC queue's blocks against a slice: pushes and pops
// in random runs, emptying it now and then, and its memory bounded by
// what it holds.
func TestGCQueue(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var q gcQueue
	var model []gcEntry
	due := int64(0)
	for range 200_000 {
		if r.IntN(100) < 52 {
			due++
			e := gcEntry{c: &chain{}, due: due}
			q.push(e)
			model = append(model, e)
		} else if len(model) > 0 {
			e, ok := q.peek()
			if !ok || e != model[0] {
				t.Fatalf("peek %v %v, want %v", e, ok, model[0])
			}
			q.pop()
			model = model[1:]
		} else if _, ok := q.peek(); ok {
			t.Fatal("peek on an empty queue")
		}
		if q.len() != len(model) {
			t.Fatalf("len %d, want %d", q.len(), len(model))
		}
		if len(q.blocks) > len(model)/gcBlock+2 {
			t.Fatalf("%d blocks for %d entries", len(q.blocks), len(model))
		}
	}
}

// TestGCQueueEmptiedReusesBlock checks that a queue emptied after every
// few entries, as commits with no reader holding the horizon leave it,
// keeps using the same block: each round pushes three entries before
// popping them (a commit's writes before its garbage collection), so
// rounds cross blocks' ends with entries pending.
func TestGCQueueEmptiedReusesBlock(t *testing.T) {
	var q gcQueue
	c := &chain{}
	blocks := map[*[gcBlock]gcEntry]bool{}
	for range 100 * gcBlock {
		for range 3 {
			q.push(gcEntry{c: c, due: 1})
		}
		for _, b := range q.blocks {
			blocks[b] = true
		}
		for range 3 {
			q.pop()
		}
	}
	if len(blocks) > 2 || q.len() != 0 {
		t.Fatalf("%d blocks used, %d entries left", len(blocks), q.len())
	}
}
