package comm_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/gocomm/comm"
)

// Rank 0 sends; rank 1 receives from it with the same tag and length.
func ExampleSend() {
	forRanks(2, func(ctx context.Context, c *comm.Comm) (string, error) {
		if c.Rank() == 0 {
			return "sent", comm.Send(ctx, c, []float32{1.5, 2.5}, 1, 7)
		}
		buf := make([]float32, 2)
		_, err := comm.Recv(ctx, c, buf, 0, 7)
		return fmt.Sprint(buf), err
	})
	// Output:
	// rank 0: sent
	// rank 1: [1.5 2.5]
}

// A receive from AnySource learns who sent.
func ExampleRecv() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		if c.Rank() != 0 {
			return "", comm.Send(ctx, c, []int{100 * c.Rank()}, 0, 0)
		}
		got := make([]string, 2)
		for range got {
			buf := make([]int, 1)
			from, err := comm.Recv(ctx, c, buf, comm.AnySource, 0)
			if err != nil {
				return "", err
			}
			got[from-1] = fmt.Sprintf("%d from rank %d", buf[0], from)
		}
		return strings.Join(got, ", "), nil
	})
	// Output:
	// rank 0: 100 from rank 1, 200 from rank 2
}

// The receiver does not know the message's length: it receives into a
// buffer long enough for any and learns the count (MPI_Get_count).
func ExampleRecvUpTo() {
	forRanks(2, func(ctx context.Context, c *comm.Comm) (string, error) {
		if c.Rank() == 0 {
			return "sent 3", comm.Send(ctx, c, []int32{7, 8, 9}, 1, 0)
		}
		buf := make([]int32, 1024)
		n, from, err := comm.RecvUpTo(ctx, c, buf, comm.AnySource, 0)
		return fmt.Sprintf("%d elements from rank %d: %v", n, from, buf[:n]), err
	})
	// Output:
	// rank 0: sent 3
	// rank 1: 3 elements from rank 0: [7 8 9]
}

// Every rank passes a value to its right-hand neighbour in a ring, all
// sends and receives started at once.
func ExampleStartBatchSendRecv() {
	forRanks(3, func(ctx context.Context, c *comm.Comm) (string, error) {
		right, left := (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
		in := make([]int32, 1)
		err := comm.StartBatchSendRecv(ctx, c, []comm.P2POp[int32]{
			{Send: true, Buf: []int32{int32(c.Rank())}, Peer: right},
			{Buf: in, Peer: left},
		}).Wait()
		return fmt.Sprintf("got %d from rank %d", in[0], left), err
	})
	// Output:
	// rank 0: got 2 from rank 2
	// rank 1: got 0 from rank 0
	// rank 2: got 1 from rank 1
}

// What torch's get_backend and DeepSpeed's has_* queries ask.
func ExampleComm_Supports() {
	forRanks(1, func(ctx context.Context, c *comm.Comm) (string, error) {
		return fmt.Sprintf("backend %s: all_reduce_coalesced %v, reduce_scatter_tensor %v, all_gather_into_tensor %v, user ops %v",
			c.Backend(),
			c.Supports(comm.CapAllReduceCoalesced),
			c.Supports(comm.CapReduceScatterTensor),
			c.Supports(comm.CapAllGatherIntoTensor),
			c.Supports(comm.CapUserOps)), nil
	})
	// Output:
	// rank 0: backend native: all_reduce_coalesced true, reduce_scatter_tensor true, all_gather_into_tensor true, user ops true
}

// Buffers every rank on the host maps: an all-reduce of them reads the
// peers' inputs where they are (here, ranks in one process without a
// shared-memory segment, the memory is ordinary and the result the same).
func ExampleAllocShared() {
	forRanks(2, func(ctx context.Context, c *comm.Comm) (string, error) {
		grad, err := comm.AllocShared[float32](ctx, c, 4)
		if err != nil {
			return "", err
		}
		defer comm.FreeShared(c, grad)
		for i := range grad {
			grad[i] = float32(c.Rank() + i)
		}
		err = comm.AllReduce(ctx, c, grad, grad, comm.Sum)
		return fmt.Sprint(grad), err
	})
	// Output:
	// rank 0: [1 3 5 7]
	// rank 1: [1 3 5 7]
}
