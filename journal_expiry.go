package fdbqueue

import (
	"encoding/binary"
	"math"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// The declared retention. Handles of one queue (in one process or many)
// may be made with different retentions (WithJournalRetention), and an
// expiry clears the records of every handle: with its own retention
// alone, a handle with a short one would clear the records of another's
// operations that are still within their retention. So the queue keeps,
// at declKey in its meta subspace, the largest retention any handle
// declared (nanoseconds, little-endian), and an expiry clears only the
// records older than twice the larger of its own retention and that one
// (see expire).
//
// A handle declares its retention with an atomic Max, a blind write that
// conflicts with no other writer (FoundationDB's Max compares unsigned
// little-endian integers and takes the operand when the key is missing:
// doMax in fdbclient/include/fdbclient/Atomic.h), in the transaction
// that writes its records, until it knows the key holds at least its
// retention: then no record of it can exist without the declaration. It
// knows once an attempt of an operation in its own transaction (given a
// Database) read a value at least its own: the key never shrinks, and
// such an attempt writes the key only after its read. An operation in a
// caller's transaction may read what another operation declared in that
// transaction, which may never commit: its read proves nothing once
// this process has declared in a caller's transaction
// (declaredInCallerTx). A handle whose declaration is not needed (the
// key holds more) writes nothing, so declarations are rare: one per
// handle whose retention is the largest yet.
//
// An attempt that expires reads the key (a snapshot read issued with the
// attempt's first reads, so no round trip of its own) and adds its read
// conflict key: an expiry that read the key before a larger retention
// was declared, with the first records that rely on it, conflicts
// instead of clearing them. Only a declaration writes the key, so this
// conflict is rare too. Every expiry reads the key, so a handle whose
// retention the key no longer covers (the key was removed) declares
// again.

// declaredInCallerTx is set once an operation of this process declared
// its retention in a caller's transaction (see declare).
var declaredInCallerTx atomic.Bool

// declRead is an attempt's read of the declared retention with the
// attempt's read version: a read made by an earlier attempt (the same
// Transaction, reset, or another) must not pass for this one's.
type declRead struct {
	v  kv.FutureValue
	rv kv.FutureInt64
}

// readDeclared issues, in the attempt's transaction, the read of the
// declared retention when the attempt may need it: while the handle does
// not know its declaration stands, or when it may expire.
func (o *op) readDeclared(tr kv.Transaction) {
	j := o.j
	if j.known.Load() && !j.expireDue.Load() && (j.count.Load()+1)%j.gcEvery != 0 {
		if o.decl.v != nil {
			o.decl = declRead{}
		}
		return
	}
	o.decl = declRead{v: tr.Snapshot().Get(j.declKey), rv: tr.GetReadVersion()}
}

// get returns the declared retention the read found, ok false when the
// attempt in tr made no read (or it failed: then so does the commit).
func (r declRead) get(tr kv.Transaction) (d time.Duration, ok bool) {
	if r.v == nil {
		return 0, false
	}
	was, err := r.rv.Get()
	if err != nil {
		return 0, false
	}
	if now, err := tr.GetReadVersion().Get(); err != nil || now != was {
		return 0, false
	}
	v, err := r.v.Get()
	if err != nil {
		return 0, false
	}
	return parseDeclared(v), true
}

// parseDeclared decodes the declared retention: an unsigned little-endian
// integer (nanoseconds), none when the key is missing. A value this
// package did not write errs towards keeping records: past the largest
// Duration it counts as the largest.
func parseDeclared(v []byte) time.Duration {
	var n uint64
	for i := len(v) - 1; i >= 0; i-- {
		if i >= 8 && v[i] != 0 {
			return math.MaxInt64
		}
		if i < 8 {
			n = n<<8 | uint64(v[i])
		}
	}
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(n)
}

// declare declares the handle's retention in tr if it may be needed, and
// expires old records if due (or owed), with this attempt's read of the
// declared retention. Without one (the attempt recorded without check:
// a staged take's first) it declares blindly while the handle does not
// know its declaration stands, and leaves the expiry to a later attempt.
func (o *op) declare(tr kv.Transaction, due bool) {
	j := o.j
	d, ok := o.decl.get(tr)
	if !ok {
		if !j.known.Load() {
			j.declareOwn(tr, o.owned)
		}
		if due {
			j.expireDue.Store(true)
		}
		return
	}
	if d < j.retention {
		j.known.Store(false) // the key no longer holds it (removed)
		j.declareOwn(tr, o.owned)
	} else if o.owned || !declaredInCallerTx.Load() {
		j.known.Store(true)
	}
	if owed := j.expireDue.CompareAndSwap(true, false); due || owed {
		_ = tr.AddReadConflictKey(j.declKey) // never inverted
		j.expire(tr, d)
	}
}

// declareOwn writes the handle's retention to the declared retention in
// tr, as the larger of the two.
func (j *journal) declareOwn(tr kv.Transaction, owned bool) {
	if !owned {
		declaredInCallerTx.Store(true)
	}
	tr.Max(j.declKey, j.declParam)
}

// expire clears, in tr, the records older than twice the larger of the
// handle's retention and declared, the largest retention any handle of
// the queue declared (see declare), in the next expireShards shards:
// blind range clears that conflict only with those operations' own
// (expired) retries.
//
// Ages are measured with client clocks: an ID carries its maker's time,
// and this client compares it with its own. An operation runs until its
// own clock says it is its handle's retention old (then it fails with
// ErrOperationExpired); this client clears its records only once its
// clock says twice the largest retention declared, which is at least
// that handle's. So a client whose clock is ahead of the operation's
// maker's by less than the maker's retention cannot clear the record of
// an operation still running: clocks may disagree by up to the
// retention.
//
// A group of shards is cleared again only once its cutoff has moved on by
// sweepStep since its last sweep (or moved back, when the clock did):
// under load, an expiry every 64 operations would otherwise clear the
// records of a few microseconds each time, at the cost of 16 range
// clears. A record is thus cleared once it is at most twice the kept
// retention plus sweepStep old and its shards' turn has come: one expiry
// in 64 operations sweeps 16 of the 256 shards, all of them in 1,024.
func (j *journal) expire(tr kv.Transaction, declared time.Duration) {
	keep := max(j.retention, declared)
	micros := j.now().UnixMicro() - 2*keep.Microseconds()
	if micros < 0 {
		// Nothing is that old (a retention of decades): a negative
		// cutoff, as an unsigned one, would clear every record.
		return
	}
	first := j.gcShard.Add(expireShards) - expireShards
	last := &j.swept[(first%journalShards)/expireShards]
	prev := last.Load()
	if d := micros - prev; d >= 0 && d < j.sweepStep().Microseconds() || !last.CompareAndSwap(prev, micros) {
		return // swept lately (or by another operation just now)
	}
	var cutoff [8]byte
	binary.BigEndian.PutUint64(cutoff[:], uint64(micros))
	// Every bound in one buffer (a bound is the prefix, a shard of at most
	// 2 bytes and the cutoff of at most 2+16 bytes): none is written
	// again once handed to ClearRange.
	buf := make([]byte, 0, (expireShards+1)*2*(len(j.prefix)+20))
	bound := func(t tuple.Tuple) []byte {
		n := len(buf)
		buf, _ = t.AppendPack(append(buf, j.prefix...))
		return buf[n:len(buf):len(buf)]
	}
	for i := range uint32(expireShards) {
		shard := int64((first + i) % journalShards)
		begin := bound(tuple.Tuple{shard})
		end := bound(tuple.Tuple{shard, cutoff[:]})
		tr.ClearRange(kv.KeyRange{Begin: begin, End: end})
	}
	if first%journalShards < expireShards {
		// Once per sweep: records of the layout before shards, keyed
		// (op ID, n) (a byte string sorts before every shard number).
		begin := bound(tuple.Tuple{[]byte{}})
		end := bound(tuple.Tuple{cutoff[:]})
		tr.ClearRange(kv.KeyRange{Begin: begin, End: end})
	}
}

// sweepStep is how far a group of shards' cutoff moves on before expire
// clears that group again: a 64th of the retention (about 9 s by
// default), which the journal's bound (records twice the retention old)
// hardly changes.
func (j *journal) sweepStep() time.Duration { return j.retention / 64 }
