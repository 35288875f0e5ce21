package memdb

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// addBytes is FDB's doLittleEndianAdd (fdbclient/include/fdbclient/Atomic.h)
// byte by byte: the reference addInto's word-wide path must agree with.
func addBytes(cur, param []byte) []byte {
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

// TestAddMatchesByteAlgorithm checks doAdd and the commit's foldCommit
// (whose results come from the value arena) against the byte-wise
// algorithm for every width pairing up to 10 bytes, with random,
// all-zero and all-0xff operands (carries through every byte, wrap).
func TestAddMatchesByteAlgorithm(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n, kind int) []byte {
		b := make([]byte, n)
		for i := range b {
			switch kind {
			case 0:
				b[i] = byte(rng.Uint32())
			case 1:
				b[i] = 0
			default:
				b[i] = 0xff
			}
		}
		return b
	}
	var a valArena
	for nc := 0; nc <= 10; nc++ {
		for np := 0; np <= 10; np++ {
			for kc := range 3 {
				for kp := range 3 {
					for range 4 {
						cur, param := fill(nc, kc), fill(np, kp)
						want := addBytes(cur, param)
						if got := doAdd(cur, param); !bytes.Equal(got, want) {
							t.Fatalf("doAdd(%x, %x) = %x, want %x", cur, param, got, want)
						}
						got, ok := foldCommit(&a, cur, nc > 0, []atomicOp{{kind: opAdd, param: param}})
						if !ok || !bytes.Equal(got, want) || len(got) != len(want) || cap(got) != len(got) {
							t.Fatalf("foldCommit(%x, %x) = %x (cap %d), want %x", cur, param, got, cap(got), want)
						}
					}
				}
			}
		}
	}
}

// Values handed out by the arena never overlap, so a stored value is
// never written again.
func TestValArenaPartsAreDisjoint(t *testing.T) {
	var a valArena
	var parts [][]byte
	for i := range 200 {
		n := i%valArenaMax + 1
		p := a.alloc(n)
		if len(p) != n || cap(p) != n {
			t.Fatalf("alloc(%d): len %d cap %d", n, len(p), cap(p))
		}
		for j := range p {
			p[j] = byte(i)
		}
		parts = append(parts, p)
	}
	for i, p := range parts {
		for _, b := range p {
			if b != byte(i) {
				t.Fatalf("part %d was overwritten: %x", i, p)
			}
		}
	}
	if big := a.alloc(valArenaMax + 1); len(big) != valArenaMax+1 {
		t.Fatalf("alloc(%d): len %d", valArenaMax+1, len(big))
	}
}
