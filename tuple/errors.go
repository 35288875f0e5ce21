package tuple

import (
	"errors"
	"fmt"
	"strings"
)

// MaxDepth is the deepest nesting of tuples that Pack and Unpack accept. It
// bounds recursion, so a cyclic Tuple (one that contains itself) or a
// hostile input of many nested-tuple codes yields an error instead of
// exhausting the stack. The top-level tuple is depth 0.
const MaxDepth = 1000

// Sentinel errors. Every error returned by this package wraps exactly one of
// them, usually inside an *Error that adds detail; test with errors.Is.
var (
	// ErrMalformed means Unpack was given bytes that are not the canonical
	// packing of any tuple: truncated data, an unknown type code, an
	// integer that is not minimally encoded, nesting deeper than MaxDepth.
	ErrMalformed = errors.New("malformed tuple encoding")

	// ErrUnsupportedType means Pack met an element it cannot encode: a Go
	// type outside the list in Tuple's doc, a nil *big.Int, an integer
	// wider than 255 bytes, or nesting deeper than MaxDepth (which is what
	// a cyclic tuple looks like).
	ErrUnsupportedType = errors.New("unsupported tuple element")

	// ErrVersionstamp means a tuple holds the wrong number of incomplete
	// versionstamps for the operation: Pack and AppendPack accept none,
	// PackWithVersionstamp exactly one.
	ErrVersionstamp = errors.New("incomplete versionstamp misuse")

	// ErrNoSuccessor means Strinc or PrefixRange was given a prefix with no
	// byte-string successor: an empty prefix or one made only of 0xff.
	ErrNoSuccessor = errors.New("prefix has no successor")
)

// Error carries the detail of a failed operation. Its Unwrap returns one of
// the sentinel errors above, so callers can use errors.Is, and errors.As to
// read the detail.
type Error struct {
	// Op is the operation that failed: "pack", "unpack", "strinc".
	Op string
	// Offset is, for Unpack, the byte offset in the input at which the
	// offending element (or, for truncation, the missing data) starts; it
	// is -1 when it does not apply.
	Offset int
	// Path is the index of the offending element, outermost tuple first:
	// [2 0] is the first element of the tuple nested at index 2. It is nil
	// when the error concerns no single element.
	Path []int
	// Type is the Go type of the offending element for Pack (e.g.
	// "chan int"), or the type code for Unpack (e.g. "code 0x32"); it may
	// be empty.
	Type string
	// Detail says what was wrong, in words.
	Detail string
	// Err is the sentinel error this error wraps.
	Err error
}

// Error formats all the detail on one line.
func (e *Error) Error() string {
	var sb strings.Builder
	sb.WriteString("tuple: ")
	sb.WriteString(e.Op)
	if e.Path != nil {
		fmt.Fprintf(&sb, " element %v", e.Path)
	}
	if e.Type != "" {
		fmt.Fprintf(&sb, " (%s)", e.Type)
	}
	if e.Offset >= 0 {
		fmt.Fprintf(&sb, " at offset %d", e.Offset)
	}
	sb.WriteString(": ")
	sb.WriteString(e.Detail)
	if e.Err != nil {
		sb.WriteString(": ")
		sb.WriteString(e.Err.Error())
	}
	return sb.String()
}

// Unwrap returns the sentinel error.
func (e *Error) Unwrap() error { return e.Err }

// prependPath records that err occurred inside element i of an enclosing
// tuple. It only touches *Error values made by this package.
func prependPath(err error, i int) error {
	if e, ok := err.(*Error); ok {
		e.Path = append([]int{i}, e.Path...)
	}
	return err
}
