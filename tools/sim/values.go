package sim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// Values are an item's 8-byte ID followed by a filler whose shape and bytes
// the ID picks, so that a value corrupted or swapped with another is
// noticed, and so that the simulation stores values from the whole range
// the layers accept (anything a write accepts, every later step must
// handle: a pop's journal record, a staged result, a give-back):
//
//   - half the items: a short pattern (0 to 47 bytes);
//   - short fillers of 0x00 and 0xff (1 to 64 bytes);
//   - limit-sized fillers of 0x00 (which the tuple encoding escapes into
//     two bytes each), 0xff and binary bytes, whose stored form (under the
//     structure's value encoding) is exactly FoundationDB's value limit,
//     kv.MaxValueSize, or one byte under it when the tuple escapes do not
//     let it land on the limit.
//
// (An empty or one-byte value cannot carry an ID; queuetest and the
// fuzzers cover those.)
//
// A twin (Config.TwinProb) is an item enqueued with an earlier item's ID,
// so with its exact value: the two are equal, and decode to one ID.
type valueShape int

const (
	shapePattern valueShape = iota
	shapeZerosShort
	shapeFFShort
	shapeZerosMax
	shapeFFMax
	shapeBinaryMax
)

func (s valueShape) String() string {
	return [...]string{"pattern", "zeros-short", "ff-short", "zeros-max", "ff-max", "binary-max"}[s]
}

// shapeOf picks an item's shape from its ID: 1 in 2 a pattern, 1 in 8
// each short filler, 1 in 12 each limit-sized one.
func shapeOf(id uint64) valueShape {
	switch x := mix(id^0x5eed) % 24; {
	case x < 12:
		return shapePattern
	case x < 15:
		return shapeZerosShort
	case x < 18:
		return shapeFFShort
	case x < 20:
		return shapeZerosMax
	case x < 22:
		return shapeFFMax
	default:
		return shapeBinaryMax
	}
}

// binaryBlock is the source of binary fillers: item id's filler starts at
// offset id in it.
var binaryBlock = func() []byte {
	b := make([]byte, 2*kv.MaxValueSize)
	r := rand.New(rand.NewPCG(0xb1a, 0x51))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

func encodeValue(enc fdbqueue.ValueEncoding, id uint64) []byte {
	head := binary.BigEndian.AppendUint64(nil, id)
	switch shape := shapeOf(id); shape {
	case shapeZerosShort, shapeFFShort:
		n := 1 + int(id%64)
		b := byte(0)
		if shape == shapeFFShort {
			b = 0xff
		}
		return append(head, bytes.Repeat([]byte{b}, n)...)
	case shapeZerosMax:
		return fill(enc, head, func(int) byte { return 0 })
	case shapeFFMax:
		return fill(enc, head, func(int) byte { return 0xff })
	case shapeBinaryMax:
		off := int(id % kv.MaxValueSize)
		return fill(enc, head, func(i int) byte { return binaryBlock[off+i] })
	}
	n := int(id * 7919 % 48)
	b := head
	for i := range n {
		b = append(b, byte(id)+byte(i))
	}
	return b
}

// fill appends to head the most bytes of at that keep the value's stored
// form within kv.MaxValueSize under enc. The tuple encoding stores a byte
// string as 0x01, its bytes with each 0x00 doubled to 0x00 0xff, and 0x00.
func fill(enc fdbqueue.ValueEncoding, head []byte, at func(int) byte) []byte {
	cost := func(b byte) int {
		if enc == fdbqueue.TupleValues && b == 0 {
			return 2
		}
		return 1
	}
	room := kv.MaxValueSize
	if enc == fdbqueue.TupleValues {
		room -= 2
	}
	for _, b := range head {
		room -= cost(b)
	}
	v := make([]byte, len(head), len(head)+room)
	copy(v, head)
	for i := 0; ; i++ {
		b := at(i)
		if room < cost(b) {
			return v
		}
		room -= cost(b)
		v = append(v, b)
	}
}

func decodeValue(enc fdbqueue.ValueEncoding, v []byte) (uint64, error) {
	if len(v) < 8 {
		return 0, fmt.Errorf("value %x is not one of the harness's values", v)
	}
	id := binary.BigEndian.Uint64(v)
	if want := encodeValue(enc, id); !bytes.Equal(v, want) {
		return 0, fmt.Errorf("value of item %d (%s, %d bytes) is corrupt: got %d bytes %x…", id, shapeOf(id), len(want), len(v), v[:min(len(v), 24)])
	}
	return id, nil
}
