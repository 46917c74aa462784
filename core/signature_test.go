package transport

import (
	"strings"
	"testing"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
)

// TestMismatchErrorShowsTheDifference: when two calls print alike, the
// message says which field differs instead of showing two identical calls.
func TestMismatchErrorShowsTheDifference(t *testing.T) {
	gather := Signature{Kind: backend.KindGather, DType: backend.Int32, Root: 2, Count: 70000, Algo: uint8(algo.Linear)}
	tree := gather
	tree.Algo = uint8(algo.Tree)
	msg := (&MismatchError{Peer: 3, Seq: 9, Local: gather, Remote: tree}).Error()
	for _, want := range []string{"algorithm linear here, tree on rank 3", "different schedules"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	// Calls that print differently need no note.
	bcast := gather
	bcast.Kind = backend.KindBroadcast
	msg = (&MismatchError{Peer: 1, Seq: 9, Local: gather, Remote: bcast}).Error()
	if strings.Contains(msg, "here,") {
		t.Errorf("message %q explains a difference the calls already show", msg)
	}
}
