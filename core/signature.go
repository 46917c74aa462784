package core

import (
	"fmt"
	"strings"
)

// Signature describes the operation a message belongs to. Every frame carries
// the sender's signature; a receiver whose own signature for the same
// (communicator, sequence number) differs fails with a *MismatchError naming
// both calls instead of hanging or mixing data.
type Signature struct {
	Kind  Kind
	DType DType
	Op    Op
	Algo  uint8 // Algorithm of the schedule; ranks must run the same one
	Root  int32
	Count uint64 // the count every rank must agree on (see comm for each op)
}

func (s Signature) String() string {
	desc := fmt.Sprintf("%v(%v, count %d", s.Kind, s.DType, s.Count)
	switch s.Kind {
	case KindAllReduce, KindReduceScatter, KindReduceScatterV:
		desc += ", " + s.Op.String()
	case KindReduce:
		desc += fmt.Sprintf(", %v, root %d", s.Op, s.Root)
	case KindBroadcast, KindGather, KindGatherV, KindScatter, KindScatterV:
		desc += fmt.Sprintf(", root %d", s.Root)
	}
	return desc + ")"
}

// MismatchError reports that a peer called a different operation at the
// same sequence number.
type MismatchError struct {
	Peer          int
	Seq           uint64
	Local, Remote Signature
}

func (e *MismatchError) Error() string {
	msg := fmt.Sprintf("comm: collective mismatch at sequence %d: this rank called %v but rank %d called %v",
		e.Seq, e.Local, e.Peer, e.Remote)
	if e.Local.String() == e.Remote.String() {
		// The calls read alike: say which hidden field differs.
		msg += " (" + e.Local.diff(e.Remote, e.Peer) + ")"
	}
	return msg
}

// diff describes the fields in which s (this rank's) and other (peer's)
// differ, for the mismatches that String does not show.
func (s Signature) diff(other Signature, peer int) string {
	var d []string
	field := func(name string, here, there any) {
		d = append(d, fmt.Sprintf("%s %v here, %v on rank %d", name, here, there, peer))
	}
	if s.Kind != other.Kind {
		field("operation", s.Kind, other.Kind)
	}
	if s.DType != other.DType {
		field("element type", s.DType, other.DType)
	}
	if s.Op != other.Op {
		field("reduce op", s.Op, other.Op)
	}
	if s.Root != other.Root {
		field("root", s.Root, other.Root)
	}
	if s.Count != other.Count {
		field("count", s.Count, other.Count)
	}
	if s.Algo != other.Algo {
		field("algorithm", Algorithm(s.Algo), Algorithm(other.Algo))
		d = append(d, "the ranks chose different schedules: pass the same arguments on every rank, or force one algorithm with GOCOMM_ALGO_<OP>")
	}
	if len(d) == 0 {
		return "the signatures are identical"
	}
	return strings.Join(d, "; ")
}
func (e *MismatchError) Unwrap() error { return ErrMismatch }
