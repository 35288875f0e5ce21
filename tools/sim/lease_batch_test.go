package sim

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// The model takes an AddBatch's jobs in order, all or none: a unique key
// an earlier job of the batch took makes a later one a duplicate of that
// job; a batch refused as too large adds nothing; a batch of unknown
// outcome added every job seen with one of its payloads or none of them,
// and one that took effect with a job not seen made that job a duplicate.
func TestLeaseModelAddBatch(t *testing.T) {
	m := LeaseModel(2)
	batch := func(call, ret int64, jobs []BatchJob, out LeaseOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: 0, Input: LeaseInput{Kind: LAddBatch, Batch: jobs}, Call: call, Output: out, Return: ret}
	}
	add := func(call, ret int64, unique, job string, dup bool) porcupine.Operation {
		return porcupine.Operation{ClientId: 0, Input: LeaseInput{Kind: LAdd, Max: 2, Unique: unique}, Call: call,
			Output: LeaseOutput{Job: job, Duplicate: dup}, Return: ret}
	}
	observe := func(call int64, jobs ...JobRecord) porcupine.Operation {
		var held []KeyHold
		for _, j := range jobs {
			if j.Unique != "" {
				held = append(held, KeyHold{Key: j.Unique, Job: j.Job})
			}
		}
		return porcupine.Operation{ClientId: 9, Input: LeaseInput{Kind: LObserve}, Call: call, Output: LeaseOutput{Jobs: jobs, Held: held}, Return: call + 1}
	}
	two := []BatchJob{{Max: 2}, {Max: 2}}
	keyed := []BatchJob{{Max: 2, Unique: "k"}, {Max: 2, Unique: "k"}}
	recA, recB := JobRecord{Job: "a", Max: 2}, JobRecord{Job: "b", Max: 2}
	recAk := JobRecord{Job: "a", Max: 2, Unique: "k"}
	added := func(jobs ...BatchAdded) LeaseOutput { return LeaseOutput{Added: jobs} }
	unknown := func(jobs ...BatchAdded) LeaseOutput { return LeaseOutput{Added: jobs, Unknown: true} }
	cases := []struct {
		name    string
		history []porcupine.Operation
		want    bool
	}{
		{"both added", []porcupine.Operation{batch(1, 2, two, added(BatchAdded{Job: "a"}, BatchAdded{Job: "b"})), observe(3, recA, recB)}, true},
		{"one of two added", []porcupine.Operation{batch(1, 2, two, added(BatchAdded{Job: "a"}, BatchAdded{Job: "b"})), observe(3, recA)}, false},
		{"a result short", []porcupine.Operation{batch(1, 2, two, added(BatchAdded{Job: "a"}))}, false},
		{"the later job a duplicate of the earlier", []porcupine.Operation{
			batch(1, 2, keyed, added(BatchAdded{Job: "a"}, BatchAdded{Job: "a", Duplicate: true})), observe(3, recAk)}, true},
		{"both added under one key", []porcupine.Operation{
			batch(1, 2, keyed, added(BatchAdded{Job: "a"}, BatchAdded{Job: "b"}))}, false},
		{"a duplicate of a job not holding the key", []porcupine.Operation{add(1, 2, "", "x", false),
			batch(3, 4, keyed, added(BatchAdded{Job: "a"}, BatchAdded{Job: "x", Duplicate: true}))}, false},
		{"a duplicate of the holder before it", []porcupine.Operation{add(1, 2, "k", "x", false),
			batch(3, 4, keyed, added(BatchAdded{Job: "x", Duplicate: true}, BatchAdded{Job: "x", Duplicate: true})),
			observe(5, JobRecord{Job: "x", Max: 2, Unique: "k"})}, true},
		{"too large, nothing added", []porcupine.Operation{batch(1, 2, two, LeaseOutput{TooLarge: true}), observe(3)}, true},
		{"too large, yet a job added", []porcupine.Operation{batch(1, 2, two, LeaseOutput{TooLarge: true}), observe(3, recA)}, false},
		{"too large with results", []porcupine.Operation{batch(1, 2, two, LeaseOutput{TooLarge: true, Added: []BatchAdded{{Job: "a"}, {Job: "b"}}})}, false},
		{"unknown, both seen, both there", []porcupine.Operation{batch(1, 2, two, unknown(BatchAdded{Job: "a"}, BatchAdded{Job: "b"})),
			observe(3, recA, recB)}, true},
		{"unknown, both seen, neither there", []porcupine.Operation{batch(1, 2, two, unknown(BatchAdded{Job: "a"}, BatchAdded{Job: "b"})),
			observe(3)}, true},
		{"unknown, both seen, one there", []porcupine.Operation{batch(1, 2, two, unknown(BatchAdded{Job: "a"}, BatchAdded{Job: "b"})),
			observe(3, recA)}, false},
		{"unknown, one seen, the other no duplicate", []porcupine.Operation{batch(1, 2, two, unknown(BatchAdded{Job: "a"}, BatchAdded{})),
			observe(3, recA)}, false},
		{"unknown, one seen, the other a duplicate of it", []porcupine.Operation{batch(1, 2, keyed, unknown(BatchAdded{Job: "a"}, BatchAdded{})),
			observe(3, recAk)}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperations(m, tc.history))
		})
	}
}

// A Lease on a queue whose batch budget may stop it after its first
// candidate (LeaseInput.Tight) may report ErrEmpty with a job it could
// lease due, when a due job whose last lease expired came first: the
// budget went to burying it. Without Tight, or with no such job due, the
// model still rejects that ErrEmpty.
func TestLeaseModelTightLease(t *testing.T) {
	m := LeaseModel(3)
	op := func(call int64, in LeaseInput, out LeaseOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: int(call), Input: in, Call: call, Output: out, Return: call + 1}
	}
	// x has one attempt, leased at 0 until 10: at 20 it is exhausted and
	// due; a is due with attempts left.
	x := []porcupine.Operation{
		op(1, LeaseInput{Kind: LAdd, Max: 1}, LeaseOutput{Job: "x"}),
		op(3, LeaseInput{Kind: LLease, N: 1, D: 10}, LeaseOutput{Leases: []LeasedJob{{Job: "x", Tag: 7, Attempt: 1}}}),
	}
	a := op(5, LeaseInput{Kind: LAdd, Max: 2}, LeaseOutput{Job: "a"})
	empty := func(tight bool) porcupine.Operation {
		return op(7, LeaseInput{Kind: LLease, Now: 20, N: 2, D: 10, Tight: tight}, LeaseOutput{Empty: true})
	}
	require.True(t, porcupine.CheckOperations(m, append(followedBy(x, a), empty(true))), "the budget went to burying x")
	require.False(t, porcupine.CheckOperations(m, append(followedBy(x, a), empty(false))), "a due, without Tight")
	require.False(t, porcupine.CheckOperations(m, []porcupine.Operation{a, empty(true)}), "a due, nothing to bury")
	require.True(t, porcupine.CheckOperations(m, append(followedBy(x, a), empty(true),
		op(9, LeaseInput{Kind: LObserve, Now: 20}, LeaseOutput{Jobs: []JobRecord{{Job: "a", Max: 2}, {Job: "x", Attempts: 1, Max: 1, Dead: true}}}))),
		"x buried, a queued")
}

// followedBy returns ops followed by op, in a new slice.
func followedBy(ops []porcupine.Operation, op porcupine.Operation) []porcupine.Operation {
	return append(append([]porcupine.Operation(nil), ops...), op)
}
