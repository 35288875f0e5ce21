package memdb

import "bytes"

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
// (fdbclient/Atomic.h), with the API-version-510 variants that the bindings
// use: BitAnd and Min on a missing key store param.
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
	carry := 0
	for i := range param {
		sum := int(param[i]) + carry
		if i < len(cur) {
			sum += int(cur[i])
		}
		out[i] = byte(sum)
		carry = sum >> 8
	}
	return out
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
