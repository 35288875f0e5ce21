package tuplediff_test

import (
	"bytes"
	"errors"
	"testing"

	ftuple "github.com/apple/foundationdb/bindings/go/src/fdb/tuple"

	"github.com/fdbqueue/fdbqueue/tuple"
)

// outcome is what an Unpack did with an input.
type outcome string

const (
	accepts outcome = "accepts"
	rejects outcome = "returns an error"
	panics  outcome = "panics"
)

func outcomeOf(err error, panicked bool) outcome {
	switch {
	case panicked:
		return panics
	case err != nil:
		return rejects
	default:
		return accepts
	}
}

// checkOurError fails unless err is what our Unpack must return for bad
// input: a *tuple.Error matching ErrMalformed whose offset lies in the
// input.
func checkOurError(t *testing.T, in []byte, err error) {
	t.Helper()
	var te *tuple.Error
	if !errors.Is(err, tuple.ErrMalformed) || !errors.As(err, &te) || te.Offset < 0 || te.Offset > len(in) {
		t.Errorf("our Unpack(%x): %v, want a *tuple.Error matching ErrMalformed with an offset in [0, %d]", in, err, len(in))
	}
}

// Why the codecs differ on the rows of TestUnpackInvalidTable where they
// do. Ours accepts only the encodings its Pack produces, plus two documented
// exceptions (tuple.Unpack's doc); the binding decodes more leniently and
// indexes past the end of truncated input.
const (
	whyTruncated = "truncated element: ours returns ErrMalformed, the binding reads past the end of its input and panics"
	whyEscapeEnd = "unterminated string ending in an escaped 0x00 0xff: the binding takes the end of input as the terminator; " +
		"design/tuple.md: strings end with a 0x00 not followed by 0xff"
	whyNested = "nested tuple without its terminating 0x00: the binding ends it at the end of input; " +
		"design/tuple.md: \"The list ends with a 0x00 byte\""
	whyMinimal = "integer not in its minimal width (a leading zero magnitude byte, or -0): it would sort out of order " +
		"(0x16 0x00 0x01 after 0x15 0xff, which is 255), so ours rejects it as non-canonical"
	whyBigLen = "0x1d/0x0b integer of fewer than 9 bytes: design/tuple.md says these codes carry 9 to 255 bytes; " +
		"ours makes one exception, below"
	whyPython = "2^64-1 as FDB's Python binding writes it (tuple.py): both accept, ours as uint64 (as if packed 0x1c), " +
		"the binding as *big.Int; the same value"
	whyTrue25 = "deprecated true (design/tuple.md, 0x25, \"Deprecated\"): ours decodes it as true (tuple.Unpack's doc), " +
		"the binding, like FDB's other bindings, does not know the code"
)

// TestUnpackInvalidTable: each row says what each side's Unpack does with
// an invalid, non-canonical or unusual input; where they differ, why. Ours
// never panics and its errors are typed; where both accept, they read the
// same values.
func TestUnpackInvalidTable(t *testing.T) {
	ff := func(n int) []byte { return bytes.Repeat([]byte{0xff}, n) }
	zero := func(n int) []byte { return make([]byte, n) }
	cat := func(p ...[]byte) []byte { return bytes.Join(p, nil) }
	b := func(p ...byte) []byte { return p }
	rows := []struct {
		in            []byte
		ours, binding outcome
		why           string
	}{
		// Truncated elements.
		{b(0x01), rejects, panics, whyTruncated},
		{b(0x01, 'a'), rejects, panics, whyTruncated},
		{b(0x02, 'a', 0x00, 0xff, 'b'), rejects, rejects, ""},
		{b(0x15), rejects, panics, whyTruncated},
		{b(0x1c, 1, 2), rejects, panics, whyTruncated},
		{b(0x13), rejects, panics, whyTruncated},
		{b(0x0c), rejects, panics, whyTruncated},
		{b(0x0c, 0x80), rejects, panics, whyTruncated},
		{b(0x1d), rejects, panics, whyTruncated},
		{b(0x1d, 0x09, 1), rejects, panics, whyTruncated},
		{b(0x0b), rejects, panics, whyTruncated},
		{b(0x0b, 0xf6, 1), rejects, panics, whyTruncated},
		{b(0x20, 0, 0), rejects, rejects, ""},
		{b(0x21, 1), rejects, rejects, ""},
		{b(0x30, 1, 2), rejects, rejects, ""},
		{b(0x33, 1), rejects, rejects, ""},
		{cat(b(0x33), ff(11)), rejects, rejects, ""},

		// Missing terminators.
		{b(0x01, 'a', 0x00, 0xff), rejects, accepts, whyEscapeEnd},
		{b(0x02, 0x00, 0xff), rejects, accepts, whyEscapeEnd},
		{b(0x05), rejects, accepts, whyNested},
		{b(0x05, 0x15, 0x01), rejects, accepts, whyNested},
		{b(0x05, 0x00, 0xff), rejects, accepts, whyNested},
		{b(0x05, 0x05, 0x00), rejects, accepts, whyNested},

		// Integers not in their minimal width.
		{b(0x15, 0x00), rejects, accepts, whyMinimal},
		{b(0x16, 0x00, 0x01), rejects, accepts, whyMinimal},
		{b(0x13, 0xff), rejects, accepts, whyMinimal},
		{b(0x12, 0xff, 0x00), rejects, accepts, whyMinimal},
		{cat(b(0x0c), ff(8)), rejects, accepts, whyMinimal},
		{cat(b(0x1d, 0x09, 0x00), ff(8)), rejects, accepts, whyMinimal},
		{cat(b(0x0b, 0xf6), ff(9)), rejects, accepts, whyMinimal},
		{b(0x1d, 0x00), rejects, accepts, whyBigLen},
		{b(0x1d, 0x01, 0x05), rejects, accepts, whyBigLen},
		{b(0x0b, 0xfe, 0xfa), rejects, accepts, whyBigLen},
		{cat(b(0x1d, 0x08), zero(8)), rejects, accepts, whyBigLen},
		{cat(b(0x1d, 0x08, 0x01), zero(7)), rejects, accepts, whyBigLen},
		{cat(b(0x0b, 0xf7), ff(8)), rejects, accepts, whyBigLen},
		{cat(b(0x1d, 0x08), ff(8)), accepts, accepts, whyPython},

		// Unusual but canonical: both accept, the same values.
		{cat(b(0x0b, 0xf7), zero(8)), accepts, accepts, ""},                       // -(2^64-1), the Python form too
		{cat(b(0x0c), zero(8)), accepts, accepts, ""},                             // -(2^64-1)
		{cat(b(0x0c, 0x7f), ff(7)), accepts, accepts, ""},                         // MinInt64
		{cat(b(0x0b, 0xf6), zero(9)), accepts, accepts, ""},                       // -(2^72-1)
		{cat(b(0x0b, 0x00), zero(255)), accepts, accepts, ""},                     // -(2^2040-1)
		{cat(b(0x1d, 0xff), ff(255)), accepts, accepts, ""},                       // 2^2040-1
		{b(0x05, 0x00, 0x00), accepts, accepts, ""},                               // ((), nil)
		{b(0x05, 0x00, 0xff, 0x05, 0x00, 0xff, 0x00, 0x00), accepts, accepts, ""}, // ((nil, (nil,)),)
		{cat(b(0x33), ff(12)), accepts, accepts, ""},                              // an incomplete versionstamp

		// Codes: deprecated, reserved, unknown.
		{b(0x25), accepts, rejects, whyTrue25},
		{b(0x15, 0x01, 0x25), accepts, rejects, whyTrue25},
		{cat(b(0x32), zero(10)), rejects, rejects, ""}, // 80-bit versionstamp, reserved
		{b(0x03), rejects, rejects, ""},                // deprecated nested tuple
		{b(0x04), rejects, rejects, ""},
		{b(0x0a), rejects, rejects, ""},
		{b(0x1e), rejects, rejects, ""},
		{b(0x22), rejects, rejects, ""}, // long double, reserved
		{b(0x23), rejects, rejects, ""}, // decimal, reserved
		{b(0x24), rejects, rejects, ""},
		{b(0x28), rejects, rejects, ""},
		{b(0x31), rejects, rejects, ""}, // 64-bit identifier, reserved
		{b(0x40), rejects, rejects, ""}, // user type codes
		{b(0x4f), rejects, rejects, ""},
		{b(0xff), rejects, rejects, ""},
		{b(0x00, 0xff), rejects, rejects, ""}, // nested nil escape at top level
	}
	for _, r := range rows {
		ou, oerr, op := oursUnpack(r.in)
		fu, ferr, fp := fdbUnpack(r.in)
		got, gotF := outcomeOf(oerr, op), outcomeOf(ferr, fp)
		if got != r.ours || gotF != r.binding {
			t.Errorf("Unpack(%x): ours %s (%v), binding %s (%v); want ours %s, binding %s (%s)",
				r.in, got, oerr, gotF, ferr, r.ours, r.binding, r.why)
			continue
		}
		if (r.ours == r.binding) != (r.why == "" || r.ours == accepts && r.why == whyPython) {
			t.Errorf("Unpack(%x): the table must say why exactly when the codecs differ", r.in)
		}
		if oerr != nil {
			checkOurError(t, r.in, oerr)
		}
		if got == accepts && gotF == accepts {
			if canon(ou, false) != canon(fu, false) {
				t.Errorf("Unpack(%x): ours %s, binding %s", r.in, canon(ou, true), canon(fu, true))
			}
			if r.why != whyPython && canon(ou, true) != canon(fu, true) {
				t.Errorf("Unpack(%x): other Go types: ours %s, binding %s", r.in, canon(ou, true), canon(fu, true))
			}
		}
	}
}

// TestUnpackMutationsAgree feeds both Unpacks corrupted packings
// (truncated, bytes changed, inserted or deleted, often to a type code) and
// checks: ours never panics and returns typed errors; when both accept,
// the values are the same; when only ours accepts, the input holds the
// deprecated 0x25 and is not the canonical packing of what ours read
// (whyTrue25); when only the binding accepts, the input is not the
// binding's own packing of what it read (the binding's lenience, the rows
// of TestUnpackInvalidTable), so ours never rejects a canonical encoding.
func TestUnpackMutationsAgree(t *testing.T) {
	g := newGen(6)
	all := corpus()
	counts := map[string]int{}
	for i := range 30000 {
		src, err := fdbPack(toFDB(all[i%len(all)]))
		if err != nil {
			t.Fatal(err)
		}
		in := g.mutate(src)
		if g.r.IntN(3) == 0 {
			in = g.mutate(in)
		}
		ou, oerr, op := oursUnpack(in)
		if op {
			t.Errorf("Unpack(%x): %v", in, oerr)
			continue
		}
		fu, ferr, _ := fdbUnpack(in)
		switch {
		case oerr == nil && ferr == nil:
			counts["both accept"]++
			if canon(ou, false) != canon(fu, false) {
				t.Errorf("Unpack(%x): ours %s, binding %s", in, canon(ou, true), canon(fu, true))
			}
			if re, ok := oursRepack(ou); ok && bytes.Equal(re, in) && canon(ou, true) != canon(fu, true) {
				t.Errorf("Unpack(%x): other Go types: ours %s, binding %s", in, canon(ou, true), canon(fu, true))
			}
		case oerr == nil:
			counts["only ours accepts"]++
			if re, ok := oursRepack(ou); (ok && bytes.Equal(re, in)) || !bytes.Contains(in, []byte{0x25}) {
				t.Errorf("Unpack(%x): ours reads %s, the binding: %v", in, canon(ou, true), ferr)
			}
		case ferr == nil:
			counts["only the binding accepts"]++
			checkOurError(t, in, oerr)
			if re, ok := fdbRepack(fu); ok && bytes.Equal(re, in) {
				t.Errorf("Unpack(%x): the binding reads %s, its own packing of it; ours: %v", in, canon(fu, true), oerr)
			}
		default:
			counts["both reject"]++
			checkOurError(t, in, oerr)
		}
	}
	t.Logf("mutated inputs: %v", counts)
	for _, k := range []string{"both accept", "only the binding accepts", "both reject"} {
		if counts[k] == 0 {
			t.Errorf("no mutated input where %s: the mutations are too narrow", k)
		}
	}
}

// interestingBytes are type codes, terminators and escapes.
var interestingBytes = []byte{
	0x00, 0x01, 0x02, 0x05, 0x0b, 0x0c, 0x13, 0x14, 0x15, 0x1c, 0x1d,
	0x20, 0x21, 0x25, 0x26, 0x27, 0x30, 0x32, 0x33, 0xf7, 0xfe, 0xff,
}

// mutate returns a corrupted copy of b.
func (g *gen) mutate(b []byte) []byte {
	b = bytes.Clone(b)
	if len(b) == 0 {
		return []byte{interestingBytes[g.r.IntN(len(interestingBytes))]}
	}
	i := g.r.IntN(len(b))
	code := interestingBytes[g.r.IntN(len(interestingBytes))]
	switch g.r.IntN(5) {
	case 0:
		return b[:g.r.IntN(len(b))]
	case 1:
		b[i] = byte(g.r.UintN(256))
	case 2:
		b[i] = code
	case 3:
		b = append(b[:i], append([]byte{code}, b[i:]...)...)
	default:
		b = append(b[:i], b[i+1:]...)
	}
	return b
}

// countIncomplete counts the incomplete versionstamps in a tuple of either
// package.
func countIncomplete(t any) int {
	n := 0
	switch v := t.(type) {
	case tuple.Tuple:
		for _, e := range v {
			n += countIncomplete(e)
		}
	case ftuple.Tuple:
		for _, e := range v {
			n += countIncomplete(e)
		}
	case tuple.Versionstamp:
		if !v.IsComplete() {
			n++
		}
	case ftuple.Versionstamp:
		if v.TransactionVersion == tuple.IncompleteVersionstamp(0).TransactionVersion {
			n++
		}
	}
	return n
}

// oursRepack packs what our Unpack returned, incomplete versionstamps
// included; ok is false if it cannot (two or more of them).
func oursRepack(t tuple.Tuple) ([]byte, bool) {
	switch countIncomplete(t) {
	case 0:
		b, err := t.Pack()
		return b, err == nil
	case 1:
		b, err := t.PackWithVersionstamp(nil)
		if err != nil {
			return nil, false
		}
		body, _ := stampOffset(b)
		return body, true
	default:
		return nil, false
	}
}

// fdbRepack is oursRepack with the binding.
func fdbRepack(t ftuple.Tuple) ([]byte, bool) {
	switch countIncomplete(t) {
	case 0:
		b, err := fdbPack(t)
		return b, err == nil
	case 1:
		b, err := t.PackWithVersionstamp(nil)
		if err != nil {
			return nil, false
		}
		body, _ := stampOffset(b)
		return body, true
	default:
		return nil, false
	}
}
