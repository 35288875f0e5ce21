package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fdbqueue/fdbqueue/memdb"
)

// Result is what a run found. Results of several runs add up with Add.
type Result struct {
	Seeds      int
	Histories  int // histories checked for linearizability
	Operations int // operations in them (Observe included)

	Violations   int // histories that are not linearizable
	Inconclusive int // checks that timed out
	Lost         int // items enqueued for sure, then gone unexplained
	Duplicated   int // extra copies of items (returned or left twice)
	Phantom      int // items that came out but were never enqueued
	DrainDiffers int // final drains that disagreed with the final Observe
	Unexpected   int // errors the harness did not expect (see Failure)
	// DecidedWithoutOpen counts the histories found linearizable by a
	// check without their open operations (withoutOpenOps, reduce.go).
	DecidedWithoutOpen int

	Unknown   int // operations left with an unknown outcome
	Recovered int // operations of unknown outcome recovered by OpID
	// RecoveredAtOnce counts those among them that their client
	// recovered at once, while their commit could still land
	// (Config.RecoverAtOnceProb).
	RecoveredAtOnce int
	Hidden          int // failed staged takes modelled as Hide and Unhide
	// Trusted counts the operations that failed with an error for which
	// kv.MaybeCommitted is false and were recorded as without effect
	// (Config.TrustErrors; staged takes as Hide and Unhide).
	Trusted int
	// ClaimsExpired counts staged takes that failed with ErrClaimExpired
	// (their waiter was too slow for the claim timeout).
	ClaimsExpired int
	// TxTimeoutOps counts the operations run on a database with a default
	// transaction timeout (Config.TxTimeoutProb), TimedOutInFlight the
	// commits of theirs that timed out in flight (their error says
	// transaction_timed_out and kv.MaybeCommitted), and TimedOut those
	// operations that failed with transaction_timed_out.
	TxTimeoutOps     int
	TimedOutInFlight int
	TimedOut         int

	// LayerIDs counts the operations run without WithOpID, under an ID
	// the layer made (Config.LayerIDProb), and LayerIDUnknown those of
	// them that failed with an outcome left unknown (kept open, or, staged
	// takes, modelled as Hide and Unhide). LayerIDReplays counts their
	// attempts that found their journal record (an earlier attempt had
	// committed: commit_unknown_result applied), as the layers log them
	// (WithLogger); SlotReplays those among them that read a journal slot
	// (every one but a staged take's).
	LayerIDs       int
	LayerIDUnknown int
	LayerIDReplays int
	SlotReplays    int

	// PushBatches counts the PushBatch calls, PushBatchesFailed those
	// that returned an error (their outcome unknown, or, with
	// TrustErrors, trusted to be none).
	PushBatches       int
	PushBatchesFailed int

	// TwinItems counts the items enqueued as twins of earlier ones
	// (Config.TwinProb): with the value of an earlier item of the same
	// structure. TwinsTaken counts the items known takes returned whose ID
	// had been enqueued more than once by then (their value had twins);
	// TwinsTogether, the items the observations found beside an equal one
	// (for each ID, its items there but one).
	TwinItems     int
	TwinsTaken    int
	TwinsTogether int

	StagedSeeds       int // seeds whose structures ran WithStaging
	ShortRetention    int // seeds whose structures had Config.ShortRetention
	VersionstampSeeds int // seeds whose Queue ran WithVersionstampOrder
	TupleSeeds        int // seeds that stored values as packed tuples

	Stats memdb.Stats // summed database counters (live fields: last run's)

	// Failure describes the first problem found, if any.
	Failure *Failure
}

// OK reports whether the run found no problem.
func (r *Result) OK() bool {
	return r.Violations == 0 && r.Lost == 0 && r.Duplicated == 0 && r.Phantom == 0 &&
		r.DrainDiffers == 0 && r.Unexpected == 0
}

// Add adds o's figures to r and keeps r's first failure.
func (r *Result) Add(o Result) {
	r.Seeds += o.Seeds
	r.Histories += o.Histories
	r.Operations += o.Operations
	r.Violations += o.Violations
	r.Inconclusive += o.Inconclusive
	r.DecidedWithoutOpen += o.DecidedWithoutOpen
	r.Lost += o.Lost
	r.Duplicated += o.Duplicated
	r.Phantom += o.Phantom
	r.DrainDiffers += o.DrainDiffers
	r.Unexpected += o.Unexpected
	r.Unknown += o.Unknown
	r.Recovered += o.Recovered
	r.RecoveredAtOnce += o.RecoveredAtOnce
	r.Hidden += o.Hidden
	r.Trusted += o.Trusted
	r.ClaimsExpired += o.ClaimsExpired
	r.TxTimeoutOps += o.TxTimeoutOps
	r.TimedOutInFlight += o.TimedOutInFlight
	r.TimedOut += o.TimedOut
	r.LayerIDs += o.LayerIDs
	r.LayerIDUnknown += o.LayerIDUnknown
	r.LayerIDReplays += o.LayerIDReplays
	r.SlotReplays += o.SlotReplays
	r.PushBatches += o.PushBatches
	r.PushBatchesFailed += o.PushBatchesFailed
	r.TwinItems += o.TwinItems
	r.TwinsTaken += o.TwinsTaken
	r.TwinsTogether += o.TwinsTogether
	r.StagedSeeds += o.StagedSeeds
	r.ShortRetention += o.ShortRetention
	r.VersionstampSeeds += o.VersionstampSeeds
	r.TupleSeeds += o.TupleSeeds
	addStats(&r.Stats, o.Stats)
	if r.Failure == nil {
		r.Failure = o.Failure
	}
}

func addStats(s *memdb.Stats, o memdb.Stats) {
	s.Transactions += o.Transactions
	s.Commits += o.Commits
	s.ReadOnlyCommits += o.ReadOnlyCommits
	s.Conflicts += o.Conflicts
	s.Retries += o.Retries
	s.TooOld += o.TooOld
	s.InjectedNotCommitted += o.InjectedNotCommitted
	s.InjectedUnknownApplied += o.InjectedUnknownApplied
	s.InjectedUnknownNotApplied += o.InjectedUnknownNotApplied
	s.InjectedTooOld += o.InjectedTooOld
	s.InjectedForced += o.InjectedForced
	s.InjectedReadErrors += o.InjectedReadErrors
	s.InjectedReadVersionErrors += o.InjectedReadVersionErrors
	s.Interrupted += o.Interrupted
	s.Reads += o.Reads
	s.RangeReads += o.RangeReads
	s.Watches, s.CommitsInFlight, s.Keys, s.Versions = o.Watches, o.CommitsInFlight, o.Keys, o.Versions
	s.ConflictHistory, s.GCQueue, s.Version, s.OldestVersion = o.ConflictHistory, o.GCQueue, o.Version, o.OldestVersion
}

// Failure is the first problem a run found.
type Failure struct {
	Seed      int64
	Round     int
	Structure string
	Reason    string

	model   porcupine.Model
	history []porcupine.Operation
	// info holds porcupine's longest linearizable prefixes of history,
	// if hasInfo (see linearize).
	info    porcupine.LinearizationInfo
	hasInfo bool
	// failedCalls describes the calls of the history that failed, with
	// their errors (failedCalls in sim_check.go).
	failedCalls []string
	// residue lists the structure's meta keys whose values hold items, as
	// the check found them (residue.go).
	residue []string
	// twins lists the IDs of the history's items whose value was enqueued
	// more than once (Config.TwinProb): equal items, which the history
	// shows under one ID.
	twins []uint64
}

// WriteHistory writes the failing history as text, in call order, then
// the longest prefix of it that the checker could linearize, with the
// model's state after each operation: the next operation of the history
// is where it got stuck; then, for a queue's history, each call that
// failed, with its error, the IDs of items with twins (equal values), and
// the items and staging keys held outside the queue.
func (f *Failure) WriteHistory(w io.Writer) error {
	if !f.HasHistory() {
		return errors.New("sim: no history to write")
	}
	m := f.model
	h := slices.Clone(f.history)
	sort.SliceStable(h, func(i, j int) bool { return h[i].Call < h[j].Call })
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s\ninitial state %s\n", f, m.DescribeState(m.Init()))
	for _, op := range h {
		ret := fmt.Sprint(op.Return)
		if op.Return == math.MaxInt64 {
			ret = "end"
		}
		fmt.Fprintf(bw, "[%6d, %6s] client %-3d %s\n", op.Call, ret, op.ClientId, m.DescribeOperation(op.Input, op.Output))
	}
	if f.hasInfo {
		var best []porcupine.Operation
		for _, part := range f.info.PartialLinearizationsOperations() {
			for _, l := range part {
				if len(l) > len(best) {
					best = l
				}
			}
		}
		fmt.Fprintf(bw, "longest linearizable prefix (%d operations):\n", len(best))
		st := m.Init()
		for _, op := range best {
			_, st = m.Step(st, op.Input, op.Output)
			fmt.Fprintf(bw, "  [%6d] %s\n", op.Call, m.DescribeOperation(op.Input, op.Output))
		}
		fmt.Fprintf(bw, "state after it: %s\n", m.DescribeState(st))
	} else {
		fmt.Fprintln(bw, "longest linearizable prefix: not computed (the history's check did not finish)")
	}
	if len(f.failedCalls) > 0 {
		fmt.Fprintf(bw, "failed calls (%d):\n", len(f.failedCalls))
		for _, c := range f.failedCalls {
			fmt.Fprintf(bw, "  %s\n", c)
		}
	}
	if len(f.twins) > 0 {
		fmt.Fprintf(bw, "items with twins (their value enqueued more than once, shown under one ID): %v\n", f.twins)
	}
	if len(f.residue) > 0 {
		fmt.Fprintf(bw, "items and staging keys outside the queue (%d keys):\n", len(f.residue))
		for _, r := range f.residue {
			fmt.Fprintf(bw, "  %s\n", r)
		}
	}
	return bw.Flush()
}

// String names the seed, round and structure of the failure and its
// reason (no round when Round is negative: a history of all the rounds).
func (f *Failure) String() string {
	if f.Round < 0 {
		return fmt.Sprintf("seed %d, %s: %s", f.Seed, f.Structure, f.Reason)
	}
	return fmt.Sprintf("seed %d, round %d, %s: %s", f.Seed, f.Round, f.Structure, f.Reason)
}

// HasVisualization reports whether the failure holds a history with
// porcupine's longest linearizable prefixes of it, which Visualize draws.
func (f *Failure) HasVisualization() bool { return f != nil && f.hasInfo }

// HasHistory reports whether the failure holds a history, which
// WriteHistory writes: one not linearizable, one whose check timed out,
// or the last one that held a lost item.
func (f *Failure) HasHistory() bool { return f != nil && f.history != nil }

// linearize checks f's history again, verbose, for porcupine's longest
// linearizable prefixes of it (so far, if this check times out), which
// WriteHistory and Visualize show. Only for a history whose first check
// decided: porcupine's verbose check waits, after its timeout, for every
// search step in progress to end, and a step of a nondeterministic model
// (LeaseModel's) over a history that check could not decide ran for
// minutes past a 30 s timeout.
func (f *Failure) linearize(timeout time.Duration) {
	_, f.info = porcupine.CheckOperationsVerbose(f.model, f.history, timeout)
	f.hasInfo = true
}

// Visualize writes porcupine's HTML visualization of the failing history
// (its longest linearizable prefixes and where they get stuck) to path.
func (f *Failure) Visualize(path string) error {
	if !f.HasVisualization() {
		return errors.New("sim: no history to visualize")
	}
	return porcupine.VisualizePath(f.model, f.info, path)
}
