package queuetest

import (
	"bytes"
	"fmt"
	"math/rand/v2"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// ValueCase is a value a queue must accept and give back unchanged.
type ValueCase struct {
	Name  string
	Value []byte
}

// Fill is the content of a generated value: byte i of a value is Fill(i).
type Fill struct {
	Name string
	Byte func(i int) byte
}

// Fills are the contents the limit values are made of: all 0x00 (which the
// tuple layer escapes, doubling its size), all 0xff, and binary bytes from
// a fixed seed (every byte value, 0x00 included).
var Fills = []Fill{
	{"zeros", func(int) byte { return 0x00 }},
	{"ff", func(int) byte { return 0xff }},
	{"binary", binaryByte},
}

var binaryBytes = func() []byte {
	b := make([]byte, kv.MaxValueSize+1)
	r := rand.New(rand.NewPCG(0x9e3779b97f4a7c15, 0xfdb))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

func binaryByte(i int) byte { return binaryBytes[i%len(binaryBytes)] }

// StoredSize is the size of the FDB value a queue stores for v under enc:
// v itself (RawValues) or the packed tuple (v,) (TupleValues).
func StoredSize(enc fdbqueue.ValueEncoding, v []byte) int {
	if enc != fdbqueue.TupleValues {
		return len(v)
	}
	p, err := tuple.Tuple{v}.Pack()
	if err != nil {
		panic(fmt.Sprintf("queuetest: packing a byte string cannot fail: %v", err))
	}
	return len(p)
}

// MakeValue returns n bytes of fill.
func MakeValue(fill Fill, n int) []byte {
	v := make([]byte, n)
	for i := range v {
		v[i] = fill.Byte(i)
	}
	return v
}

// MaxValue returns the longest value made of fill whose stored form under
// enc fits FoundationDB's value limit (kv.MaxValueSize): the largest value
// the layers accept, which every later step must also handle.
func MaxValue(enc fdbqueue.ValueEncoding, fill Fill) []byte {
	full := MakeValue(fill, kv.MaxValueSize)
	lo, hi := 0, len(full) // StoredSize(full[:lo]) fits; find the largest
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if StoredSize(enc, full[:mid]) <= kv.MaxValueSize {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return bytes.Clone(full[:lo])
}

// OverMaxValue returns the shortest value made of fill that enc can not
// store: MaxValue with one more byte.
func OverMaxValue(enc fdbqueue.ValueEncoding, fill Fill) []byte {
	n := len(MaxValue(enc, fill)) + 1
	for StoredSize(enc, MakeValue(fill, n)) <= kv.MaxValueSize {
		n++
	}
	return MakeValue(fill, n)
}

// LimitValues returns the values at every limit the layers accept under
// enc: empty, one byte (0x00 and 0xff), and for each fill a short value and
// the largest accepted one.
func LimitValues(enc fdbqueue.ValueEncoding) []ValueCase {
	cases := []ValueCase{
		{"empty", []byte{}},
		{"one-zero", []byte{0x00}},
		{"one-ff", []byte{0xff}},
	}
	for _, fill := range Fills {
		cases = append(cases,
			ValueCase{fill.Name + "-short", MakeValue(fill, 37)},
			ValueCase{fill.Name + "-max", MaxValue(enc, fill)},
		)
	}
	return cases
}
