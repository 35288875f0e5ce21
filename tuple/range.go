package tuple

import (
	"bytes"

	"github.com/fdbqueue/fdbqueue/kv"
)

// Range returns the range of keys strictly inside t's packed prefix:
// [Pack(t)+0x00, Pack(t)+0xff). It holds the packing of every tuple that
// extends t by at least one element, and not Pack(t) itself. Errors are
// those of Pack.
func (t Tuple) Range() (kv.KeyRange, error) {
	p, err := t.Pack()
	if err != nil {
		return kv.KeyRange{}, err
	}
	begin := make([]byte, len(p)+1)
	copy(begin, p)
	end := make([]byte, len(p)+1)
	copy(end, p)
	end[len(p)] = 0xff
	return kv.KeyRange{Begin: begin, End: end}, nil
}

// PrefixRange returns the range of every key that starts with prefix,
// prefix included: [prefix, Strinc(prefix)). Both bounds are fresh copies.
// The error matches ErrNoSuccessor if prefix is empty or all 0xff.
func PrefixRange(prefix []byte) (kv.KeyRange, error) {
	end, err := Strinc(prefix)
	if err != nil {
		return kv.KeyRange{}, err
	}
	return kv.KeyRange{Begin: bytes.Clone(prefix), End: end}, nil
}

// Strinc returns the first byte string that is greater than every string
// starting with prefix: prefix with its trailing 0xff bytes removed and its
// last remaining byte incremented. The result is a fresh slice. The error
// matches ErrNoSuccessor if prefix is empty or all 0xff.
func Strinc(prefix []byte) ([]byte, error) {
	// Not bytes.TrimRight(prefix, "\xff"): its cutset is read as UTF-8, so it
	// would also trim every other byte that is invalid UTF-8, such as 0xfe.
	n := len(prefix)
	for n > 0 && prefix[n-1] == 0xff {
		n--
	}
	if n == 0 {
		return nil, &Error{Op: "strinc", Offset: -1, Detail: "prefix is empty or made only of 0xff bytes", Err: ErrNoSuccessor}
	}
	out := bytes.Clone(prefix[:n])
	out[len(out)-1]++
	return out, nil
}
