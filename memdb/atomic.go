package memdb

import (
	"bytes"
	"encoding/binary"
)

// opKind is a buffered mutation kind of an atomic operation.
type opKind uint8

const (
	opAdd opKind = iota + 1
	opMax
	opMin
	opAnd
	opOr
	opXor
	opByteMin
	opByteMax
	opAppendIfFits
	opCompareAndClear
	// opSetVS sets the (already stamped) value: used only at commit, when a
	// versionstamped value is folded into a key's pending operations.
	opSetVS
)

// atomicOp is one atomic operation waiting for the value it applies to.
type atomicOp struct {
	kind  opKind
	param []byte
}

// applyOp returns the value after op, given the current value (exists
// reports whether the key exists). The algorithms are FoundationDB's
// (fdbclient/include/fdbclient/Atomic.h), with the API-version-510 variants
// that the bindings use: BitAnd and Min on a missing key store param.
func applyOp(kind opKind, cur []byte, exists bool, param []byte) ([]byte, bool) {
	switch kind {
	case opAdd:
		return doAdd(cur, param), true
	case opMax:
		return doMax(cur, param), true
	case opMin:
		if !exists {
			return param, true
		}
		return doMin(cur, param), true
	case opAnd:
		if !exists {
			return param, true
		}
		return doBitwise(cur, param, func(a, b byte) byte { return a & b }, true), true
	case opOr:
		return doBitwise(cur, param, func(a, b byte) byte { return a | b }, false), true
	case opXor:
		return doBitwise(cur, param, func(a, b byte) byte { return a ^ b }, false), true
	case opByteMin:
		if !exists || bytes.Compare(param, cur) < 0 {
			return param, true
		}
		return cur, true
	case opByteMax:
		if !exists || bytes.Compare(param, cur) > 0 {
			return param, true
		}
		return cur, true
	case opAppendIfFits:
		if !exists {
			return param, true
		}
		if len(cur)+len(param) > maxValueSize {
			return cur, true
		}
		out := make([]byte, 0, len(cur)+len(param))
		out = append(append(out, cur...), param...)
		return out, true
	case opCompareAndClear:
		if exists && bytes.Equal(cur, param) {
			return nil, false
		}
		return cur, exists
	case opSetVS:
		return param, true
	}
	return cur, exists
}

// doAdd adds two little-endian integers; param's length sets the width.
func doAdd(cur, param []byte) []byte {
	if len(cur) == 0 || len(param) == 0 {
		return param
	}
	out := make([]byte, len(param))
	addInto(out, cur, param)
	return out
}

// addInto writes doAdd's result (neither cur nor param empty) into out,
// len(param) bytes: FDB's doLittleEndianAdd
// (fdbclient/include/fdbclient/Atomic.h), where bytes of cur beyond param's
// width are ignored, missing ones count as zero and the last carry is
// dropped. An operand of up to 8 bytes (a counter's) is added as one word:
// the sum modulo 2^(8*width) is the same.
func addInto(out, cur, param []byte) {
	if n := len(param); n <= 8 {
		if n == 8 && len(cur) >= 8 {
			binary.LittleEndian.PutUint64(out, binary.LittleEndian.Uint64(cur)+binary.LittleEndian.Uint64(param))
			return
		}
		var c, p uint64
		for i := range min(len(cur), n) {
			c |= uint64(cur[i]) << (8 * i)
		}
		for i, b := range param {
			p |= uint64(b) << (8 * i)
		}
		s := c + p
		for i := range out[:n] {
			out[i] = byte(s >> (8 * i))
		}
		return
	}
	carry := 0
	for i := range param {
		sum := int(param[i]) + carry
		if i < len(cur) {
			sum += int(cur[i])
		}
		out[i] = byte(sum)
		carry = sum >> 8
	}
}

// doBitwise combines cur and param bytewise; the result has param's length.
// Bytes of param beyond cur are combined with zero (and) or kept (or, xor).
func doBitwise(cur, param []byte, f func(a, b byte) byte, and bool) []byte {
	if len(param) == 0 {
		return param
	}
	if !and && len(cur) == 0 {
		return param
	}
	out := make([]byte, len(param))
	for i := range param {
		if i < len(cur) {
			out[i] = f(cur[i], param[i])
		} else if and {
			out[i] = 0
		} else {
			out[i] = param[i]
		}
	}
	return out
}

// widened returns cur truncated or zero-extended to n bytes.
func widened(cur []byte, n int) []byte {
	out := make([]byte, n)
	copy(out, cur)
	return out
}

// doMax keeps the larger of cur and param as unsigned little-endian integers
// of param's width.
func doMax(cur, param []byte) []byte {
	if len(cur) == 0 || len(param) == 0 {
		return param
	}
	i := min(len(cur), len(param)) - 1
	for j := len(param) - 1; j > i; j-- {
		if param[j] != 0 {
			return param
		}
	}
	for ; i >= 0; i-- {
		if param[i] > cur[i] {
			return param
		}
		if param[i] < cur[i] {
			return widened(cur, len(param))
		}
	}
	return param
}

// doMin keeps the smaller of cur and param as unsigned little-endian integers
// of param's width.
func doMin(cur, param []byte) []byte {
	if len(param) == 0 {
		return param
	}
	i := min(len(cur), len(param)) - 1
	for j := len(param) - 1; j > i; j-- {
		if param[j] != 0 {
			return widened(cur, len(param))
		}
	}
	for ; i >= 0; i-- {
		if param[i] > cur[i] {
			return widened(cur, len(param))
		}
		if param[i] < cur[i] {
			return param
		}
	}
	return param
}

// foldOps applies ops in order to (cur, exists).
func foldOps(cur []byte, exists bool, ops []atomicOp) ([]byte, bool) {
	for _, op := range ops {
		cur, exists = applyOp(op.kind, cur, exists, op.param)
	}
	return cur, exists
}

// foldCommit is foldOps for the commit step, which keeps the result: a
// counter's Add (one operation of up to valArenaMax bytes on an existing
// value) takes its result from the DB's value arena rather than an
// allocation of its own, as FDB's commit computes it in the mutation
// batch's arena (fdbclient/include/fdbclient/Atomic.h: doLittleEndianAdd's Arena&).
func foldCommit(a *valArena, cur []byte, exists bool, ops []atomicOp) ([]byte, bool) {
	if len(ops) == 1 && ops[0].kind == opAdd {
		if p := ops[0].param; len(p) > 0 && len(p) <= valArenaMax && len(cur) > 0 {
			out := a.alloc(len(p))
			addInto(out, cur, p)
			return out, true
		}
	}
	return foldOps(cur, exists, ops)
}

// valArena hands out the memory of small values the commit step computes
// (the results of atomic operations), carved from blocks of valArenaBlock
// bytes: one allocation per block rather than per value. Each part is
// handed out once and never written again after its value is stored, so
// values stay immutable; a block lives while any of its values does (at
// most valArenaBlock bytes per value kept, the cost of sharing), and it
// holds nothing but value bytes, so a value keeps no transaction
// reachable. The caller holds DB.mu exclusively.
type valArena struct{ buf bumpBlock }

const (
	valArenaBlock = 64
	valArenaMax   = 16
)

// alloc returns n zero bytes: from a block if n is at most valArenaMax,
// else an allocation of their own.
func (a *valArena) alloc(n int) []byte {
	if n > valArenaMax {
		return make([]byte, n)
	}
	if out, ok := a.buf.take(n); ok {
		return out
	}
	a.buf = make(bumpBlock, 0, valArenaBlock)
	out, _ := a.buf.take(n)
	return out
}

// bumpBlock is a block whose bytes are handed out once each, in order,
// and never reused (a transaction's spill, the commit's value arena).
type bumpBlock []byte

// take returns the block's next n bytes (capacity n), or false when fewer
// are left.
func (b *bumpBlock) take(n int) ([]byte, bool) {
	u := len(*b)
	if n > cap(*b)-u {
		return nil, false
	}
	*b = (*b)[:u+n]
	return (*b)[u : u+n : u+n], true
}

// copy returns a copy of v from alloc.
func (a *valArena) copy(v []byte) []byte {
	out := a.alloc(len(v))
	copy(out, v)
	return out
}
