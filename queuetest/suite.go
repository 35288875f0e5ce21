package queuetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// RunLayerTests runs the whole suite against the backend newHarness makes.
// Every check is a subtest named Area/Check with a harness of its own,
// closed when the subtest ends.
func RunLayerTests(t *testing.T, newHarness HarnessMaker) {
	t.Helper()
	areas := []struct {
		name  string
		tests []check
	}{
		{"FIFO", fifoChecks()},
		{"Priority", priorityChecks()},
		{"Compose", composeChecks()},
		{"Values", valueChecks()},
		{"Batches", batchChecks()},
		{"Faults", faultChecks()},
		{"ReadFaults", readFaultChecks()},
		{"Staged", stagedChecks()},
		{"Recover", recoverChecks()},
		{"Errors", errorChecks()},
		{"Conflicts", conflictChecks()},
		{"Jobs", jobChecks()},
	}
	for _, area := range areas {
		t.Run(area.name, func(t *testing.T) {
			for _, c := range area.tests {
				t.Run(c.name, func(t *testing.T) {
					c.run(t, newFixture(t, newHarness))
				})
			}
		})
	}
}

// check is one named check of the suite.
type check struct {
	name string
	run  func(t *testing.T, f *fixture)
}

// fixture is one check's setup: a fresh harness, its database, a context
// that ends with the check (or after a bound, so a hung backend fails the
// check instead of the whole run), and fresh subspaces under the prefix.
type fixture struct {
	h      Harness
	db     kv.Database
	ctx    context.Context
	prefix []byte
	subs   int
	// sweeping: a read fault sweep runs the check's operation (see
	// readFaultChecks), whose fault may hit any read, the operation's
	// retries' included.
	sweeping bool
}

// checkTimeout bounds one check: a failure bound, never a synchronisation.
const checkTimeout = 2 * time.Minute

func newFixture(t *testing.T, newHarness HarnessMaker) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), checkTimeout)
	t.Cleanup(cancel)
	h, err := newHarness(ctx, t)
	require.NoError(t, err, "the harness maker failed")
	require.NotNil(t, h, "the harness maker returned a nil harness")
	t.Cleanup(h.Close)
	db := h.Database()
	require.NotNil(t, db, "Harness.Database returned nil")
	prefix := bytes.Clone(h.Prefix())
	require.NotEmpty(t, prefix, "Harness.Prefix must not be empty")
	require.Less(t, prefix[0], byte(0xff), "Harness.Prefix must lie below the system keys")
	return &fixture{h: h, db: db, ctx: ctx, prefix: prefix}
}

// sub returns a fresh subspace under the harness prefix.
func (f *fixture) sub(t *testing.T, name string) fdbqueue.Subspace {
	t.Helper()
	f.subs++
	s, err := fdbqueue.SubspaceFromBytes(f.prefix).Sub(name, int64(f.subs))
	require.NoError(t, err)
	return s
}

// queue makes a Queue in a fresh subspace.
func (f *fixture) queue(t *testing.T, name string, opts ...fdbqueue.Option) *fdbqueue.Queue {
	t.Helper()
	q, err := fdbqueue.NewQueue(f.sub(t, name), opts...)
	require.NoError(t, err, "NewQueue(%s)", name)
	return q
}

// pqueue makes a PriorityQueue in a fresh subspace.
func (f *fixture) pqueue(t *testing.T, name string, opts ...fdbqueue.Option) *fdbqueue.PriorityQueue {
	t.Helper()
	pq, err := fdbqueue.NewPriorityQueue(f.sub(t, name), opts...)
	require.NoError(t, err, "NewPriorityQueue(%s)", name)
	return pq
}

// queueMode is one way to make a Queue: key layout and value encoding.
type queueMode struct {
	name string
	opts []fdbqueue.Option
}

// queueModes are the key layouts (the recipes' indexed keys, versionstamp
// order) times the value encodings.
var queueModes = []queueMode{
	{"indexed/raw", nil},
	{"indexed/tuple", []fdbqueue.Option{fdbqueue.WithValueEncoding(fdbqueue.TupleValues)}},
	{"vstamp/raw", []fdbqueue.Option{fdbqueue.WithVersionstampOrder()}},
	{"vstamp/tuple", []fdbqueue.Option{fdbqueue.WithVersionstampOrder(), fdbqueue.WithValueEncoding(fdbqueue.TupleValues)}},
}

// encodings are the value encodings, for the PriorityQueue.
var encodings = []struct {
	name string
	enc  fdbqueue.ValueEncoding
}{{"raw", fdbqueue.RawValues}, {"tuple", fdbqueue.TupleValues}}

// encodingOf returns the value encoding a mode's options choose.
func encodingOf(name string) fdbqueue.ValueEncoding {
	if bytes.HasSuffix([]byte(name), []byte("tuple")) {
		return fdbqueue.TupleValues
	}
	return fdbqueue.RawValues
}

// with returns opts followed by more, without sharing opts' array.
func with(opts []fdbqueue.Option, more ...fdbqueue.Option) []fdbqueue.Option {
	return append(append([]fdbqueue.Option(nil), opts...), more...)
}

// strs turns strings into values.
func strs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// enqueueAll enqueues each value in its own transaction.
func (f *fixture) enqueueAll(t *testing.T, q *fdbqueue.Queue, values [][]byte) {
	t.Helper()
	for i, v := range values {
		require.NoError(t, q.Enqueue(f.ctx, f.db, v), "Enqueue of value %d (%s)", i, describe(v))
	}
}

// drain dequeues until ErrEmpty and returns what came out, in order.
func (f *fixture) drain(t *testing.T, q *fdbqueue.Queue) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		v, err := q.Dequeue(f.ctx, f.db)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			f.requireDepthZero(t, q)
			return out
		}
		require.NoError(t, err, "Dequeue after %d items", len(out))
		out = append(out, v)
		require.LessOrEqual(t, len(out), 1_000_000, "Dequeue never reports ErrEmpty")
	}
}

// drainPQ pops the smallest item until ErrEmpty.
func (f *fixture) drainPQ(t *testing.T, pq *fdbqueue.PriorityQueue) []fdbqueue.Item {
	t.Helper()
	var out []fdbqueue.Item
	for {
		it, err := pq.PopMin(f.ctx, f.db)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			f.requireDepthZero(t, pq)
			return out
		}
		require.NoError(t, err, "PopMin after %d items", len(out))
		out = append(out, it)
		require.LessOrEqual(t, len(out), 1_000_000, "PopMin never reports ErrEmpty")
	}
}

// requireValues compares value lists, describing values instead of dumping
// up to 100,000 bytes each.
func requireValues(t *testing.T, want, got [][]byte, msgAndArgs ...any) {
	t.Helper()
	if len(want) == len(got) {
		same := true
		for i := range want {
			if !bytes.Equal(want[i], got[i]) {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	require.Fail(t, fmt.Sprintf("values differ:\nwant %s\n got %s", describeAll(want), describeAll(got)), msgAndArgs...)
}

// requireValue compares one value.
func requireValue(t *testing.T, want, got []byte, msgAndArgs ...any) {
	t.Helper()
	requireValues(t, [][]byte{want}, [][]byte{got}, msgAndArgs...)
}

// describe names a value briefly: its length and, if short, its bytes.
func describe(v []byte) string {
	if len(v) <= 16 {
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%d bytes %x…%x", len(v), v[:6], v[len(v)-4:])
}

func describeAll(vs [][]byte) string {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		if i == 12 && len(vs) > 14 {
			fmt.Fprintf(&b, "… %d more", len(vs)-i)
			break
		}
		b.WriteString(describe(v))
	}
	b.WriteByte(']')
	return b.String()
}

// rawRange reads every key of a subspace's range and its meta range (the
// journal and staging keys at prefix + 0xff), in one snapshot.
func (f *fixture) rawKeys(t *testing.T, sub fdbqueue.Subspace) []kv.KeyValue {
	t.Helper()
	r, err := tuple.PrefixRange(sub.Bytes())
	require.NoError(t, err)
	kvs, err := kv.ReadTransact(f.ctx, f.db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{Mode: kv.StreamingModeWantAll}).GetSlice()
	})
	require.NoError(t, err, "reading the raw keys of %s", sub)
	return kvs
}

// itemCount counts the keys in a subspace's item range (its Range(), not
// the meta keys past it).
func (f *fixture) itemCount(t *testing.T, sub fdbqueue.Subspace) int {
	t.Helper()
	r, err := sub.Range()
	require.NoError(t, err)
	kvs, err := kv.ReadTransact(f.ctx, f.db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{Mode: kv.StreamingModeWantAll}).GetSlice()
	})
	require.NoError(t, err)
	return len(kvs)
}

// get reads one key in its own transaction.
func (f *fixture) get(t *testing.T, key []byte) []byte {
	t.Helper()
	v, err := kv.ReadTransact(f.ctx, f.db, func(tr kv.ReadTransaction) ([]byte, error) {
		return tr.Get(key).Get()
	})
	require.NoError(t, err, "reading %q", key)
	return v
}

// key returns a key under the harness prefix, outside every queue subspace
// the fixture makes (those start with a packed tuple, code 0x02).
func (f *fixture) key(s string) []byte {
	return append(append(bytes.Clone(f.prefix), 0x01), s...)
}

// errAbort makes a caller's transaction roll back.
var errAbort = errors.New("queuetest: the caller aborts its transaction")
