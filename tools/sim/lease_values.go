package sim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/fdbqueue/fdbqueue/kv"
)

// A job's payload in the lease simulation is its value ID (8 bytes, big
// endian: the call of the Add or AddBatch that added it and its index in
// the batch, see jobValueID) followed by a filler whose shape and bytes the
// value ID picks, so that a payload corrupted, cut short, or swapped with
// another job's is noticed wherever it is read (a Lease, a Job lookup, an
// Observe): only the one value ID carries those bytes. The shapes span what
// JobQueue.Add accepts (a payload is stored as is, at most kv.MaxValueSize
// bytes), because whatever an Add accepts, every later step (a Lease's
// read and its journal record, a retry's replay, a dead-letter move, a
// requeue, a batch's budget) must handle:
//
//   - the ID alone (8 bytes, the smallest payload that can carry it) and
//     short patterns (up to 47 bytes more);
//   - short fillers of 0x00 and of 0xff (1 to 64 bytes);
//   - a mid-sized binary filler (1,000 to 30,000 bytes), so that batches
//     land anywhere under their budget;
//   - limit-sized fillers of 0x00, of 0xff and of binary bytes: exactly
//     kv.MaxValueSize bytes in all, the largest payload Add accepts.
//
// A quarter of the jobs carry a limit-sized payload. (An empty payload
// cannot carry an ID; jobqueue_limits_test.go and the fuzzers cover it.)
type leaseShape int

const (
	leaseIDOnly leaseShape = iota
	leasePattern
	leaseZerosShort
	leaseFFShort
	leaseBinaryMid
	leaseZerosMax
	leaseFFMax
	leaseBinaryMax
)

func (s leaseShape) String() string {
	return [...]string{"id-only", "pattern", "zeros-short", "ff-short", "binary-mid", "zeros-max", "ff-max", "binary-max"}[s]
}

// limit reports whether the shape's payloads are kv.MaxValueSize bytes.
func (s leaseShape) limit() bool { return s >= leaseZerosMax }

// jobValueID is the value ID of job i (0 for an Add) of the Add or
// AddBatch called at call.
func jobValueID(call int64, i int) int64 { return call<<8 | int64(i) }

// leaseBatchMax is the most jobs an AddBatch of the simulation adds (its
// index must fit jobValueID's low byte).
const leaseBatchMax = 256

// leaseMix scrambles a value ID (splitmix64's finalizer), so that the
// shapes do not follow the calls' order.
func leaseMix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// leaseShapeOf picks value ID id's shape: 1 in 12 the ID alone, 1 in 3 a
// pattern, 1 in 8 each short filler, 1 in 12 a mid-sized binary one, 1 in
// 12 each limit-sized one.
func leaseShapeOf(id int64) leaseShape {
	switch x := leaseMix(uint64(id)^0x1ea5e) % 24; {
	case x < 2:
		return leaseIDOnly
	case x < 8:
		return leasePattern
	case x < 11:
		return leaseZerosShort
	case x < 14:
		return leaseFFShort
	case x < 16:
		return leaseBinaryMid
	case x < 18:
		return leaseZerosMax
	case x < 20:
		return leaseFFMax
	case x < 22:
		return leaseBinaryMax
	}
	return leasePattern
}

// leaseBlock is the source of the binary fillers: value ID id's starts at
// offset id mod kv.MaxValueSize in it.
var leaseBlock = func() []byte {
	b := make([]byte, 2*kv.MaxValueSize)
	r := rand.New(rand.NewPCG(0x1ea5e, 0xb10c))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

// leaseJobValue returns the payload of value ID id (see leaseShape).
func leaseJobValue(id int64) []byte {
	head := binary.BigEndian.AppendUint64(nil, uint64(id))
	u := leaseMix(uint64(id) ^ 0xf111)
	off := int(uint64(id) % kv.MaxValueSize)
	switch shape := leaseShapeOf(id); shape {
	case leaseIDOnly:
		return head
	case leaseZerosShort, leaseZerosMax:
		n := 1 + int(u%64)
		if shape.limit() {
			n = kv.MaxValueSize - len(head)
		}
		return append(head, make([]byte, n)...)
	case leaseFFShort, leaseFFMax:
		n := 1 + int(u%64)
		if shape.limit() {
			n = kv.MaxValueSize - len(head)
		}
		return append(head, bytes.Repeat([]byte{0xff}, n)...)
	case leaseBinaryMid:
		n := 1000 + int(u%29_001)
		return append(head, leaseBlock[off:off+n]...)
	case leaseBinaryMax:
		return append(head, leaseBlock[off:off+kv.MaxValueSize-len(head)]...)
	}
	n := 1 + int(u%47)
	b := head
	for i := range n {
		b = append(b, byte(id)+byte(i)*7)
	}
	return b
}

// decodeLeaseValue returns the value ID that v, a job's payload as read
// back, carries, or an error if v is not exactly that ID's payload
// (corrupted, cut short, extended, or not one of the harness's).
func decodeLeaseValue(v []byte) (int64, error) {
	if len(v) < 8 {
		return 0, fmt.Errorf("payload %x is too short to carry a value ID", v)
	}
	id := int64(binary.BigEndian.Uint64(v))
	if want := leaseJobValue(id); !bytes.Equal(v, want) {
		return id, fmt.Errorf("payload of value ID %d (%s, %d bytes) is corrupt: got %d bytes %x…",
			id, leaseShapeOf(id), len(want), len(v), v[:min(len(v), 24)])
	}
	return id, nil
}
