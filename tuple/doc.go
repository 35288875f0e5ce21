// Package tuple is a pure-Go codec for FoundationDB's tuple layer,
// byte-compatible with the official bindings: a key packed here can be read
// by the Python, Java or C++ layers and vice versa. It needs neither cgo nor
// the FDB client library.
//
// A Tuple is a list of typed elements; Pack turns it into a byte string
// whose byte order equals the tuples' semantic order, which is what makes
// range reads over a subspace of tuple keys work:
//
//	key, err := tuple.Tuple{"jobs", int64(42)}.AppendPack(prefix[:len(prefix):len(prefix)])
//	t, err := tuple.Unpack(key[len(prefix):])
//
// # Encoding
//
// Each element is a one-byte type code followed by its payload:
//
//	0x00        nil (inside a nested tuple written 0x00 0xff)
//	0x01        []byte, with each 0x00 escaped as 0x00 0xff, then 0x00
//	0x02        string, its UTF-8 bytes escaped the same way
//	0x05        Tuple: its elements, then 0x00
//	0x0b        negative integer of 9..255 bytes (inverted length byte,
//	            one's complement of the magnitude)
//	0x0c..0x13  negative integer of 8..1 bytes (one's complement)
//	0x14        zero
//	0x15..0x1c  positive integer of 1..8 bytes, big-endian
//	0x1d        positive integer of 9..255 bytes (length byte first)
//	0x20, 0x21  float32, float64: big-endian IEEE bits, all bits inverted
//	            for negatives, only the sign bit otherwise
//	0x26, 0x27  false, true (0x25, a deprecated true, is decoded only)
//	0x30        UUID, 16 bytes
//	0x33        Versionstamp, 12 bytes
//
// Integers always take their minimal width, whatever their Go type: int8(5),
// uint64(5) and big.NewInt(5) all pack to 0x15 0x05. The Go types accepted by
// Pack are listed on Tuple; Unpack returns a normalised set of types
// (int64, uint64 or *big.Int; float32 or float64; []byte; string; Tuple; nil;
// bool; UUID; Versionstamp), documented on Unpack.
//
// Unpack accepts exactly the encodings Pack produces, plus the deprecated
// 0x25 for true and the Python binding's 0x1d/0x0b forms of 2^64-1 and
// -(2^64-1). So for every input Unpack accepts, packing the result gives
// the input back, except that 0x25 comes back as 0x27, those two integers
// come back as 0x1c and 0x0c, and incomplete versionstamps must be re-packed
// with PackWithVersionstamp.
//
// # Ordering
//
// Compare gives the order of packed tuples without packing them: by type
// code first (nil < []byte < string < Tuple < integers < float32 < float64 <
// false < true < UUID < Versionstamp), integers by value across Go types,
// floats in IEEE total order (-NaN < -Inf < -0 < +0 < +Inf < +NaN), strings
// and bytes bytewise, nested tuples element by element, a prefix before its
// extensions. Note that every integer sorts before every float, so keys
// that mix 1 and 1.5 in one position do not sort numerically.
//
// Range and PrefixRange turn a tuple or a raw prefix into a kv.KeyRange for
// range reads and clears; Strinc computes the end of a prefix range.
//
// # Versionstamps
//
// A Versionstamp is a 10-byte transaction version assigned by the database
// at commit plus a 2-byte user version. To build a key that embeds the
// version of the transaction writing it, put IncompleteVersionstamp(n) in the
// tuple, pack it with PackWithVersionstamp and write the result with
// kv.Transaction.SetVersionstampedKey: the key ends with a 4-byte
// little-endian offset (API version 520 layout) that tells the database where
// the ten placeholder bytes are. A tuple may hold at most one incomplete
// versionstamp. Pack and AppendPack refuse incomplete versionstamps, so a
// placeholder can never be written as a literal key by mistake;
// HasIncompleteVersionstamp tells which function to call.
//
// # Errors
//
// Nothing in this package panics on bad input. Every error wraps one of the
// sentinels ErrMalformed (Unpack's input is not a canonical encoding),
// ErrUnsupportedType (Pack met an element it cannot encode),
// ErrVersionstamp (wrong number of incomplete versionstamps) or
// ErrNoSuccessor (Strinc of an empty or all-0xff prefix); test them with
// errors.Is. The concrete type is *Error, which records the operation, the
// byte offset (for Unpack), the index path of the offending element and its
// type; read it with errors.As. Nesting is limited to MaxDepth levels so
// that cyclic tuples and hostile inputs fail cleanly.
//
// Values of the package's types are safe for concurrent reads; Pack, Unpack
// and Compare keep no state between calls.
package tuple
