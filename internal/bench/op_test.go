package bench

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestBusFactor(t *testing.T) {
	tests := []struct {
		op   Op
		n    int
		want float64
	}{
		{AllReduce, 1, 0}, {AllReduce, 2, 1}, {AllReduce, 4, 1.5}, {AllReduce, 8, 1.75},
		{ReduceScatter, 2, 0.5}, {ReduceScatter, 4, 0.75},
		{AllGather, 2, 0.5}, {AllGather, 8, 0.875},
		{AllToAll, 2, 0.5}, {AllToAll, 4, 0.75},
		{Broadcast, 2, 1}, {Broadcast, 7, 1}, {Reduce, 3, 1},
		{SendRecv, 2, 1}, {PingPong, 2, 1}, {Barrier, 4, 0},
		{AllReduce, 0, 0},
	}
	for _, tt := range tests {
		if got := tt.op.BusFactor(tt.n); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%v.BusFactor(%d) = %g, want %g", tt.op, tt.n, got, tt.want)
		}
	}
}

func TestBandwidths(t *testing.T) {
	// 1 GB in one second over 4 ranks: algbw 1 GB/s, busbw 1.5 GB/s.
	alg, bus := AllReduce.Bandwidths(1e9, 1, 4)
	if alg != 1 || bus != 1.5 {
		t.Errorf("AllReduce.Bandwidths(1e9, 1s, 4) = %g, %g; want 1, 1.5", alg, bus)
	}
	alg, bus = AllGather.Bandwidths(64<<20, 0.01, 2)
	if want := float64(64<<20) / 0.01 / 1e9; math.Abs(alg-want) > 1e-9 || math.Abs(bus-want/2) > 1e-9 {
		t.Errorf("AllGather.Bandwidths = %g, %g; want %g, %g", alg, bus, want, want/2)
	}
	for _, c := range []struct {
		size int64
		sec  float64
	}{{0, 1}, {8, 0}, {8, -1}} {
		if a, b := AllReduce.Bandwidths(c.size, c.sec, 2); a != 0 || b != 0 {
			t.Errorf("Bandwidths(%d, %g) = %g, %g; want zeros", c.size, c.sec, a, b)
		}
	}
}

func TestLayoutOf(t *testing.T) {
	tests := []struct {
		op         Op
		size       int64
		esize, n   int
		want       Layout
		ok         bool
		descriptor string
	}{
		{AllReduce, 64, 4, 2, Layout{Count: 16, Block: 16, Send: 16, Recv: 16}, true, "allreduce S = buffer"},
		{AllReduce, 66, 4, 2, Layout{Count: 16, Block: 16, Send: 16, Recv: 16}, true, "rounded down to elements"},
		{AllReduce, 3, 4, 2, Layout{}, false, "less than an element"},
		{Broadcast, 8, 8, 3, Layout{Count: 1, Block: 1, Send: 1, Recv: 1}, true, "one element"},
		{AllGather, 64, 4, 2, Layout{Count: 16, Block: 8, Send: 8, Recv: 16}, true, "allgather S = output"},
		{AllGather, 64, 4, 3, Layout{Count: 15, Block: 5, Send: 5, Recv: 15}, true, "rounded to whole blocks"},
		{ReduceScatter, 64, 4, 4, Layout{Count: 16, Block: 4, Send: 16, Recv: 4}, true, "reducescatter S = input"},
		{AllToAll, 64, 4, 4, Layout{Count: 16, Block: 4, Send: 16, Recv: 16}, true, "alltoall S = send buffer"},
		{AllToAll, 8, 4, 4, Layout{}, false, "fewer elements than ranks"},
		{Barrier, 1 << 20, 4, 4, Layout{}, true, "barrier moves nothing"},
		{AllReduce, 64, 0, 2, Layout{}, false, "bad element size"},
		{AllReduce, 64, 4, 0, Layout{}, false, "no ranks"},
	}
	for _, tt := range tests {
		got, ok := LayoutOf(tt.op, tt.size, tt.esize, tt.n)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: LayoutOf(%v, %d, %d, %d) = %+v, %v; want %+v, %v", tt.descriptor, tt.op, tt.size, tt.esize, tt.n, got, ok, tt.want, tt.ok)
		}
	}
}

// Property: for every op, a layout holds whole elements and blocks, never
// more than S, and S counted back from it is what the size column shows.
func TestLayoutProperties(t *testing.T) {
	for _, op := range AllOps {
		for _, n := range []int{1, 2, 3, 4, 7} {
			for _, es := range []int{1, 2, 4, 8} {
				for size := int64(0); size < 300; size += 7 {
					l, ok := LayoutOf(op, size, es, n)
					if !ok || op == Barrier {
						continue
					}
					if int64(l.Count*es) > size {
						t.Fatalf("%v %d B n=%d es=%d: count %d exceeds the size", op, size, n, es, l.Count)
					}
					if op.Blocked() && l.Block*n != l.Count {
						t.Fatalf("%v %d B n=%d: %d blocks of %d != count %d", op, size, n, n, l.Block, l.Count)
					}
					if max(l.Send, l.Recv) != l.Count {
						t.Fatalf("%v: the larger buffer (%d, %d) is not S (%d)", op, l.Send, l.Recv, l.Count)
					}
				}
			}
		}
	}
}

func TestParseOp(t *testing.T) {
	for _, op := range AllOps {
		got, err := ParseOp(strings.ToUpper(op.String()))
		if err != nil || got != op {
			t.Errorf("ParseOp(%q) = %v, %v", op.String(), got, err)
		}
		var u Op
		b, _ := op.MarshalText()
		if err := u.UnmarshalText(b); err != nil || u != op {
			t.Errorf("text round trip of %v: %v, %v", op, u, err)
		}
	}
	for alias, want := range map[string]Op{"all_reduce": AllReduce, "bcast": Broadcast, "all-to-all": AllToAll, "pt2pt": PingPong} {
		if got, err := ParseOp(alias); err != nil || got != want {
			t.Errorf("ParseOp(%q) = %v, %v; want %v", alias, got, err, want)
		}
	}
	if _, err := ParseOp("allreduse"); err == nil || !strings.Contains(err.Error(), "allreduce") {
		t.Errorf("ParseOp(typo) error = %v; want one listing the ops", err)
	}
	if s := Op(99).String(); s != "Op(99)" {
		t.Errorf("Op(99).String() = %q", s)
	}
}

func TestParseOpSpecs(t *testing.T) {
	tests := []struct {
		in   string
		want []OpSpec
		err  string
	}{
		{in: "allreduce", want: []OpSpec{{Op: AllReduce}}},
		{in: " allreduce , bcast ", want: []OpSpec{{Op: AllReduce}, {Op: Broadcast}}},
		{in: "allreduce,broadcast@64M,alltoall@1K:1M", want: []OpSpec{
			{Op: AllReduce}, {Op: Broadcast, Min: 64 << 20, Max: 64 << 20}, {Op: AllToAll, Min: 1 << 10, Max: 1 << 20}}},
		{in: "broadcast@64M,all", want: []OpSpec{
			{Op: Broadcast, Min: 64 << 20, Max: 64 << 20}, {Op: AllReduce}, {Op: Reduce}, {Op: AllGather},
			{Op: ReduceScatter}, {Op: AllToAll}, {Op: SendRecv}, {Op: PingPong}, {Op: Barrier}}},
		{in: "", err: "no op"},
		{in: "allreduce,allreduce", err: "twice"},
		{in: "nosuch", err: "unknown op"},
		{in: "allreduce@1M:1K", err: "below"},
		{in: "allreduce@lots", err: "size"},
	}
	for _, tt := range tests {
		got, err := ParseOpSpecs(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseOpSpecs(%q) error = %v; want one containing %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseOpSpecs(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	// String is the inverse of the parser.
	specs, _ := ParseOpSpecs("allreduce,broadcast@64M,alltoall@1K:1M")
	var parts []string
	for _, s := range specs {
		parts = append(parts, s.String())
	}
	if got := strings.Join(parts, ","); got != "allreduce,broadcast@64M,alltoall@1K:1M" {
		t.Errorf("OpSpec.String round trip = %q", got)
	}
}
