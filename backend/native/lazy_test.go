package native

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
)

// The lazy-copy bookkeeping of the engine, without sockets: an execution
// over int32 elements whose Work stands for a copy of src.

const lazyES = 4

// lazySrc returns n int32 elements 1000, 1001, ...
func lazySrcOf(n int) []byte {
	b := make([]byte, n*lazyES)
	for i := range n {
		binary.LittleEndian.PutUint32(b[i*lazyES:], uint32(1000+i))
	}
	return b
}

// unset marks Work elements nothing wrote.
const unset = 0xEEEEEEEE

// lazyExec returns an execution whose Work (n elements, all unset) stands
// for src, with pending set as given.
func lazyExec(src []byte, pending []elemRange) *execution {
	n := len(src) / lazyES
	work := make([]byte, n*lazyES)
	for i := range n {
		binary.LittleEndian.PutUint32(work[i*lazyES:], unset)
	}
	e := &execution{c: &Comm{}, req: &backend.Request{DType: core.Int32, Op: core.Sum}, esize: lazyES, work: work}
	e.lazyCopy(src)
	if pending != nil {
		e.pending = slices.Clone(pending)
	}
	return e
}

func elems(b []byte) []uint32 {
	out := make([]uint32, len(b)/lazyES)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[i*lazyES:])
	}
	return out
}

// workCopied reports, per element of Work, whether it holds src's value.
func workCopied(e *execution) string {
	var s []byte
	for i, v := range elems(e.work) {
		switch v {
		case uint32(1000 + i):
			s = append(s, 'c')
		case unset:
			s = append(s, '.')
		default:
			s = append(s, '?')
		}
	}
	return string(s)
}

func TestLazyCopyPendsEverything(t *testing.T) {
	e := lazyExec(lazySrcOf(10), nil)
	if want := []elemRange{{0, 10}}; !slices.Equal(e.pending, want) {
		t.Fatalf("pending = %v, want %v", e.pending, want)
	}
	if got := workCopied(e); got != ".........." {
		t.Fatalf("lazyCopy copied something at once: %s", got)
	}
}

func TestLazyDrop(t *testing.T) {
	tests := []struct {
		pending []elemRange
		lo, hi  int
		want    []elemRange
	}{
		{[]elemRange{{0, 10}}, 0, 10, nil},
		{[]elemRange{{0, 10}}, 0, 4, []elemRange{{4, 10}}},
		{[]elemRange{{0, 10}}, 6, 10, []elemRange{{0, 6}}},
		{[]elemRange{{0, 10}}, 3, 7, []elemRange{{0, 3}, {7, 10}}},
		{[]elemRange{{0, 10}}, 5, 5, []elemRange{{0, 10}}},                 // empty range
		{[]elemRange{{0, 10}}, 7, 3, []elemRange{{0, 10}}},                 // reversed range
		{[]elemRange{{2, 4}}, 4, 8, []elemRange{{2, 4}}},                   // touching, not overlapping
		{[]elemRange{{2, 4}}, 0, 2, []elemRange{{2, 4}}},                   // touching below
		{[]elemRange{{0, 3}, {7, 10}}, 2, 8, []elemRange{{0, 2}, {8, 10}}}, // spans a gap
		{[]elemRange{{0, 3}, {5, 6}, {7, 10}}, 4, 7, []elemRange{{0, 3}, {7, 10}}},
		{[]elemRange{{0, 3}, {7, 10}}, 0, 10, nil},
		{nil, 0, 10, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v-[%d,%d)", tt.pending, tt.lo, tt.hi), func(t *testing.T) {
			e := lazyExec(lazySrcOf(10), tt.pending)
			if tt.pending == nil {
				e.pending = nil
			}
			e.drop(tt.lo, tt.hi)
			if !slices.Equal(e.pending, tt.want) {
				t.Errorf("pending = %v, want %v", e.pending, tt.want)
			}
			if got := workCopied(e); got != ".........." {
				t.Errorf("drop copied into work: %s", got)
			}
		})
	}
}

func TestLazyCovered(t *testing.T) {
	tests := []struct {
		name    string
		pending []elemRange
		off, n  int
		want    bool
		after   []elemRange
		copied  string // Work afterwards: c = holds src, . = untouched
	}{
		{"whole, all pending", []elemRange{{0, 10}}, 0, 10, true, []elemRange{{0, 10}}, ".........."},
		{"inside one range", []elemRange{{0, 3}, {5, 10}}, 6, 3, true, []elemRange{{0, 3}, {5, 10}}, ".........."},
		{"exactly one range", []elemRange{{0, 3}, {5, 10}}, 5, 5, true, []elemRange{{0, 3}, {5, 10}}, ".........."},
		{"zero length", []elemRange{{0, 10}}, 4, 0, false, []elemRange{{0, 10}}, ".........."},
		{"nothing pending", []elemRange{}, 0, 4, false, []elemRange{}, ".........."},
		// Partly pending: the pending parts are copied now and leave the list.
		{"straddles a gap", []elemRange{{0, 3}, {5, 10}}, 2, 5, false, []elemRange{{0, 2}, {7, 10}}, "..c..cc..."},
		{"over the gap only", []elemRange{{0, 3}, {5, 10}}, 3, 2, false, []elemRange{{0, 3}, {5, 10}}, ".........."},
		{"beyond a range's end", []elemRange{{0, 4}}, 2, 4, false, []elemRange{{0, 2}}, "..cc......"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := lazyExec(lazySrcOf(10), tt.pending)
			if got := e.covered(tt.off, tt.n); got != tt.want {
				t.Errorf("covered(%d, %d) = %v, want %v", tt.off, tt.n, got, tt.want)
			}
			if !slices.Equal(e.pending, tt.after) {
				t.Errorf("pending after = %v, want %v", e.pending, tt.after)
			}
			if got := workCopied(e); got != tt.copied {
				t.Errorf("work after = %s, want %s", got, tt.copied)
			}
		})
	}
}

func TestLazySettle(t *testing.T) {
	e := lazyExec(lazySrcOf(10), []elemRange{{1, 3}, {6, 9}})
	e.settle(2, 7)
	if want := []elemRange{{1, 2}, {7, 9}}; !slices.Equal(e.pending, want) {
		t.Errorf("pending = %v, want %v", e.pending, want)
	}
	if got, want := workCopied(e), "..c...c..."; got != want {
		t.Errorf("work = %s, want %s (only pending parts inside [2,7) copied)", got, want)
	}
}

// TestLazyPayload: a send of a range still pending reads the caller's
// input; any other send reads Work (after copying what was pending of it).
func TestLazyPayload(t *testing.T) {
	src := lazySrcOf(10)
	e := lazyExec(src, []elemRange{{0, 5}})
	p := e.payload(algo.Xfer{Buf: algo.Work, Off: 1, Len: 3})
	if &p[0] != &src[1*lazyES] || len(p) != 3*lazyES {
		t.Errorf("payload of a pending range does not read the input in place")
	}
	p = e.payload(algo.Xfer{Buf: algo.Work, Off: 3, Len: 4})
	if &p[0] != &e.work[3*lazyES] {
		t.Errorf("payload of a partly pending range does not read Work")
	}
	if !bytes.Equal(p[:2*lazyES], src[3*lazyES:5*lazyES]) {
		t.Errorf("payload of a partly pending range: the pending part %v was not copied first", elems(p[:2*lazyES]))
	}
	if want := []elemRange{{0, 3}}; !slices.Equal(e.pending, want) {
		t.Errorf("pending = %v, want %v", e.pending, want)
	}
}

// TestLazyReduceInto: a reducing receive into a pending range writes
// input op received; elsewhere Work op= received.
func TestLazyReduceInto(t *testing.T) {
	src := lazySrcOf(4)
	got := make([]byte, 2*lazyES)
	binary.LittleEndian.PutUint32(got, 5)
	binary.LittleEndian.PutUint32(got[lazyES:], 7)

	e := lazyExec(src, nil)
	x := algo.Xfer{Buf: algo.Work, Off: 1, Len: 2, Reduce: true}
	if err := e.reduceInto(x, got, true); err != nil {
		t.Fatal(err)
	}
	if w, want := elems(e.work), []uint32{unset, 1001 + 5, 1002 + 7, unset}; !slices.Equal(w, want) {
		t.Errorf("from the input: work = %v, want %v", w, want)
	}

	e = lazyExec(src, nil)
	binary.LittleEndian.PutUint32(e.work[1*lazyES:], 10)
	binary.LittleEndian.PutUint32(e.work[2*lazyES:], 20)
	if err := e.reduceInto(x, got, false); err != nil {
		t.Fatal(err)
	}
	if w, want := elems(e.work), []uint32{unset, 15, 27, unset}; !slices.Equal(w, want) {
		t.Errorf("in Work: work = %v, want %v", w, want)
	}
}

// TestLazyRunSettlesTheRest: local copies overwrite (drop) their targets,
// read the input where still pending, and at the end of the plan every
// range still pending is copied; no element is copied twice over a
// copy's result.
func TestLazyRunSettlesTheRest(t *testing.T) {
	src := lazySrcOf(8)
	e := lazyExec(src, nil)
	plan := algo.Plan{Steps: []algo.Step{
		{Copies: []algo.Copy{{From: algo.Work, FromOff: 0, ToOff: 6, Len: 2}}}, // work[6:8] = src[0:2]
		{Copies: []algo.Copy{{From: algo.Work, FromOff: 6, ToOff: 2, Len: 1}}}, // work[2] = work[6] = src[0]
	}}
	if err := e.run(context.Background(), plan); err != nil {
		t.Fatal(err)
	}
	if len(e.pending) != 0 {
		t.Errorf("pending after run = %v, want none", e.pending)
	}
	want := []uint32{1000, 1001, 1000, 1003, 1004, 1005, 1000, 1001}
	if w := elems(e.work); !slices.Equal(w, want) {
		t.Errorf("work after run = %v, want %v", w, want)
	}
}

// TestLazyInPlace: inputs below lazyMinBytes are copied at once, larger
// ones lazily, and a buffer that is its own input not at all.
func TestLazyInPlace(t *testing.T) {
	for _, n := range []int{lazyMinBytes/lazyES - 1, lazyMinBytes / lazyES} {
		src := lazySrcOf(n)
		e := lazyExec(lazySrcOf(1), nil)
		e.pending = nil
		recv := make([]byte, len(src))
		got := lazyInPlace(e, src, recv)
		lazy := n*lazyES >= lazyMinBytes
		if &got[0] != &recv[0] {
			t.Fatalf("%d bytes: lazyInPlace did not return recv", n*lazyES)
		}
		if copied := bytes.Equal(recv, src); copied == lazy {
			t.Errorf("%d bytes: copied at once = %v, want %v", n*lazyES, copied, !lazy)
		}
		if wantPending := lazy; (len(e.pending) > 0) != wantPending {
			t.Errorf("%d bytes: pending = %v, want pending %v", n*lazyES, e.pending, wantPending)
		}
		if lazy && (&e.lazySrc[0] != &src[0] || !slices.Equal(e.pending, []elemRange{{0, n}})) {
			t.Errorf("%d bytes: work does not stand for the whole input", n*lazyES)
		}
		e.pending = nil
		if got := lazyInPlace(e, recv, recv); &got[0] != &recv[0] || len(e.pending) != 0 {
			t.Errorf("%d bytes in place: pending %v", n*lazyES, e.pending)
		}
	}
}
