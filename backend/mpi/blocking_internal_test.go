//go:build mpi && cgo

package mpi

import (
	"strings"
	"testing"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
)

func TestParseBlocking(t *testing.T) {
	def := defaultBlocking()
	if def[core.KindAllReduce] != 16<<20 || def[core.KindBroadcast] != 1<<20 || def[core.KindBarrier] != 4<<20 {
		t.Fatalf("default table %v", def)
	}
	for _, k := range []core.Kind{core.KindAllToAllV, core.KindMonitoredBarrier, core.KindNone} {
		if def[k] != noBlocking {
			t.Errorf("default: %v may block", k)
		}
	}
	cases := []struct {
		v    string
		want map[core.Kind]int64 // kinds checked; others as noted
	}{
		{"", map[core.Kind]int64{core.KindAllReduce: 16 << 20, core.KindBroadcast: 1 << 20}},
		{"none", map[core.Kind]int64{core.KindAllReduce: noBlocking, core.KindBarrier: noBlocking}},
		{"64K", map[core.Kind]int64{core.KindAllReduce: 64 << 10, core.KindBroadcast: 64 << 10, core.KindAllToAllV: noBlocking}},
		{"1MiB", map[core.Kind]int64{core.KindGather: 1 << 20}},
		{"1048576", map[core.Kind]int64{core.KindScatterV: 1 << 20}},
		{"0", map[core.Kind]int64{core.KindAllReduce: 0}},
		{"allreduce=8M, Broadcast=none", map[core.Kind]int64{
			core.KindAllReduce: 8 << 20, core.KindBroadcast: noBlocking, core.KindGather: 4 << 20}},
		{"reducescatterv=2k,*=8", map[core.Kind]int64{
			core.KindReduceScatterV: 2 << 10, core.KindAllReduce: 8, core.KindAllToAllV: noBlocking}},
		{"alltoallv=1M", map[core.Kind]int64{core.KindAllToAllV: noBlocking}},
	}
	for _, tc := range cases {
		p, err := parseBlocking(tc.v)
		if err != nil {
			t.Errorf("%q: %v", tc.v, err)
			continue
		}
		for k, want := range tc.want {
			if p[k] != want {
				t.Errorf("%q: %v limit %d, want %d", tc.v, k, p[k], want)
			}
		}
	}
	for _, v := range []string{"lots", "-5", "allreduce", "allreduce=1X", "sendrecv=1M", "monitoredbarrier=1M", "1T"} {
		_, err := parseBlocking(v)
		if err == nil || !strings.Contains(err.Error(), EnvBlockingMax) || !strings.Contains(err.Error(), "allreduce=16M") {
			t.Errorf("%q: got %v, want an error naming %s and showing the syntax", v, err, EnvBlockingMax)
		}
	}
}

func TestBlockingBytesAgree(t *testing.T) {
	// What decides blocking must be what every rank knows: here rank 1 of
	// 3 receives one count, and the all-gathered total decides.
	buf := make([]byte, 24)
	cases := []struct {
		req  backend.Request
		want int64
		ok   bool
	}{
		{backend.Request{Kind: core.KindAllReduce, DType: core.Float32, Send: buf[:8], Recv: buf[:8]}, 8, true},
		{backend.Request{Kind: core.KindReduce, DType: core.Float32, Send: buf[:12]}, 12, true},
		{backend.Request{Kind: core.KindBroadcast, DType: core.Int16, Recv: buf[:6]}, 6, true},
		{backend.Request{Kind: core.KindAllGatherV, DType: core.Float64, Counts: []int{1, 0, 2}, Send: buf[:8], Recv: buf}, 24, true},
		{backend.Request{Kind: core.KindScatterV, DType: core.Float32, Counts: []int{1, 2, 3}, Recv: buf[:4]}, 24, true},
		{backend.Request{Kind: core.KindReduceScatter, DType: core.Uint8, Counts: []int{2, 2, 2}, Send: buf[:6], Recv: buf[:2]}, 6, true},
		{backend.Request{Kind: core.KindBarrier}, 0, true},
		{backend.Request{Kind: core.KindAllToAllV, DType: core.Float32, Counts: []int{1, 2, 3}}, 0, false},
		{backend.Request{Kind: core.KindSend, DType: core.Float32, Send: buf}, 0, false},
	}
	for _, tc := range cases {
		n, ok := blockingBytes(&tc.req)
		if n != tc.want || ok != tc.ok {
			t.Errorf("%v: got %d, %v; want %d, %v", tc.req.Kind, n, ok, tc.want, tc.ok)
		}
	}
}
