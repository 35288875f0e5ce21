package tuple_test

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fdbqueue/fdbqueue/tuple"
)

func Example() {
	key, err := tuple.Tuple{"jobs", int64(42), []byte{0x00, 0x01}}.Pack()
	if err != nil {
		panic(err)
	}
	fmt.Printf("% x\n", key)

	t, err := tuple.Unpack(key)
	if err != nil {
		panic(err)
	}
	fmt.Println(t)
	fmt.Printf("%T %T %T\n", t[0], t[1], t[2])
	// Output:
	// 02 6a 6f 62 73 00 15 2a 01 00 ff 01 00
	// ("jobs", 42, b"\x00\x01")
	// string int64 []uint8
}

func ExampleTuple_AppendPack() {
	prefix := []byte{0xfe, 0x01} // a subspace prefix
	buf := make([]byte, 0, 64)
	for i := range 3 {
		// Reusing buf: no allocation once it is big enough.
		var err error
		buf, err = tuple.Tuple{int64(i)}.AppendPack(append(buf[:0], prefix...))
		if err != nil {
			panic(err)
		}
		fmt.Printf("% x\n", buf)
	}
	// Output:
	// fe 01 14
	// fe 01 15 01
	// fe 01 15 02
}

func ExampleTuple_PackWithVersionstamp() {
	t := tuple.Tuple{"log", tuple.IncompleteVersionstamp(1)}
	key, err := t.PackWithVersionstamp([]byte{0x01})
	if err != nil {
		panic(err)
	}
	offset := binary.LittleEndian.Uint32(key[len(key)-4:])
	fmt.Printf("% x\n", key[:len(key)-4])
	fmt.Println("placeholder at", offset)

	_, err = t.Pack()
	fmt.Println(errors.Is(err, tuple.ErrVersionstamp))
	// Output:
	// 01 02 6c 6f 67 00 33 ff ff ff ff ff ff ff ff ff ff 00 01
	// placeholder at 7
	// true
}

func ExampleCompare() {
	a := tuple.Tuple{"q", int8(-1)}
	b := tuple.Tuple{"q", uint64(1 << 63)}
	c := tuple.Tuple{"q", float32(-100)} // every integer sorts before every float
	fmt.Println(tuple.Compare(a, b), tuple.Compare(b, c), tuple.Compare(a, tuple.Tuple{"q", int64(-1)}))
	// Output:
	// -1 -1 0
}

func ExampleUnpack_errors() {
	_, err := tuple.Unpack([]byte{0x16, 0x00, 0x05})
	var te *tuple.Error
	if errors.As(err, &te) {
		fmt.Println(errors.Is(err, tuple.ErrMalformed), te.Offset, te.Detail)
	}
	// Output:
	// true 0 integer is not minimally encoded (leading zero byte)
}

func ExamplePrefixRange() {
	r, err := tuple.PrefixRange([]byte("jobs\xff"))
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q %q\n", r.Begin, r.End)
	// Output:
	// "jobs\xff" "jobt"
}
