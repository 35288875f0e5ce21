package fdbqueue_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
)

// JobID.Bytes and OpID.Bytes work on values that are not addressable (a
// field of a returned struct, where id[:] does not compile) and return
// copies: changing them changes no ID.
func TestIDBytes(t *testing.T) {
	lease := func() fdbqueue.Lease { return fdbqueue.Lease{JobID: fdbqueue.JobID{0: 1, 15: 2}} }
	b := lease().JobID.Bytes()
	require.Equal(t, []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}, b)
	id := fdbqueue.JobID{0: 7}
	c := id.Bytes()
	c[0] = 9
	require.Equal(t, byte(7), id[0], "Bytes returns a copy")

	op := fdbqueue.NewOpID()
	ob := op.Bytes()
	require.Len(t, ob, 16)
	require.Equal(t, op[:], ob)
	ob[0]++
	require.NotEqual(t, op[:], ob, "Bytes returns a copy")
}
