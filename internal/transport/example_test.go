package transport_test

import (
	"context"
	"fmt"

	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/transport"
)

// Two ranks of an in-process world exchange one message. A TCP world
// (transport.ConnectTCP) behaves the same.
func ExampleNewInprocWorld() {
	world := transport.NewInprocWorld(2, transport.InprocOptions{})
	defer world[0].Close()
	defer world[1].Close()
	ctx := context.Background()

	h := transport.Header{Comm: 1, Seq: 0, Tag: 42, Sig: transport.Signature{Kind: core.KindSend, DType: core.Byte, Count: 5}}
	if err := world[0].Send(ctx, 1, h, []byte("hello")); err != nil {
		fmt.Println(err)
		return
	}
	buf := make([]byte, 5)
	from, err := world[1].Recv(ctx, transport.AnySource, h, buf)
	fmt.Println(from, string(buf), err)
	// Output: 0 hello <nil>
}
