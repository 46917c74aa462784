package core

import (
	"strings"
	"testing"
)

// TestMismatchErrorShowsTheDifference: when two calls print alike, the
// message says which field differs instead of showing two identical calls.
func TestMismatchErrorShowsTheDifference(t *testing.T) {
	gather := Signature{Kind: KindGather, DType: Int32, Root: 2, Count: 70000, Algo: uint8(Linear)}
	tree := gather
	tree.Algo = uint8(Tree)
	msg := (&MismatchError{Peer: 3, Seq: 9, Local: gather, Remote: tree}).Error()
	for _, want := range []string{"algorithm linear here, tree on rank 3", "different schedules"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	// Calls that print differently need no note.
	bcast := gather
	bcast.Kind = KindBroadcast
	msg = (&MismatchError{Peer: 1, Seq: 9, Local: gather, Remote: bcast}).Error()
	if strings.Contains(msg, "here,") {
		t.Errorf("message %q explains a difference the calls already show", msg)
	}
}
