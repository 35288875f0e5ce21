package tuple

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// Tuple is an ordered list of elements that packs into a byte string whose
// byte order matches the tuples' semantic order (see Compare).
//
// An element is one of: nil; []byte; string; Tuple (a nested tuple); int,
// int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, *big.Int or
// big.Int; float32; float64; bool; UUID; Versionstamp. Any other type makes
// Pack return an error matching ErrUnsupportedType.
type Tuple []any

// UUID is a 16-byte universally unique identifier, packed in network
// (big-endian) byte order with type code 0x30.
type UUID [16]byte

// String formats u in the canonical 8-4-4-4-12 hexadecimal form.
func (u UUID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], u[10:16])
	return string(b[:])
}

// Versionstamp is FoundationDB's 96-bit versionstamp (type code 0x33): the
// 10-byte transaction version assigned at commit (an 8-byte big-endian
// commit version followed by a 2-byte batch order) and a 2-byte user version
// chosen by the application to order several stamps within one transaction.
//
// A versionstamp whose TransactionVersion is ten 0xff bytes is incomplete:
// a placeholder that the database fills in when the transaction commits.
// Use IncompleteVersionstamp to make one and PackWithVersionstamp to pack it.
type Versionstamp struct {
	// TransactionVersion is the commit version and batch order, big-endian.
	TransactionVersion [10]byte
	// UserVersion orders versionstamps written by the same transaction.
	UserVersion uint16
}

// incompleteTransactionVersion is the placeholder written for a
// transaction version that is not known yet.
var incompleteTransactionVersion = [10]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// IncompleteVersionstamp returns a placeholder versionstamp with the given
// user version, to be completed by the database at commit time. Pack such a
// tuple with PackWithVersionstamp and write it with the SetVersionstampedKey
// (or SetVersionstampedValue) mutation.
func IncompleteVersionstamp(userVersion uint16) Versionstamp {
	return Versionstamp{TransactionVersion: incompleteTransactionVersion, UserVersion: userVersion}
}

// IsComplete reports whether v holds a real transaction version, that is,
// whether its TransactionVersion is anything other than ten 0xff bytes.
func (v Versionstamp) IsComplete() bool {
	return v.TransactionVersion != incompleteTransactionVersion
}

// String formats v as the hexadecimal transaction version, a colon and the
// decimal user version, e.g. "0000000000000001000a:7".
func (v Versionstamp) String() string {
	return fmt.Sprintf("%x:%d", v.TransactionVersion[:], v.UserVersion)
}

// String formats t in a Python-like notation for logs and test failures,
// e.g. (1, "a", b"\x00", (nil,)). It is not a parseable format.
func (t Tuple) String() string {
	var sb strings.Builder
	writeTuple(&sb, t, 0)
	return sb.String()
}

func writeTuple(sb *strings.Builder, t Tuple, depth int) {
	sb.WriteByte('(')
	if depth > MaxDepth {
		sb.WriteString("...")
	} else {
		for i, e := range t {
			if i > 0 {
				sb.WriteString(", ")
			}
			switch e := e.(type) {
			case nil:
				sb.WriteString("nil")
			case []byte:
				fmt.Fprintf(sb, "b%+q", e)
			case string:
				fmt.Fprintf(sb, "%q", e)
			case Tuple:
				writeTuple(sb, e, depth+1)
			case float32:
				fmt.Fprintf(sb, "float32(%v)", e)
			case UUID:
				fmt.Fprintf(sb, "UUID(%s)", e)
			case Versionstamp:
				fmt.Fprintf(sb, "Versionstamp(%s)", e)
			default:
				fmt.Fprintf(sb, "%v", e)
			}
		}
		if len(t) == 1 {
			sb.WriteByte(',')
		}
	}
	sb.WriteByte(')')
}
