package comm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/profile"
	"github.com/gocomm/comm/rendezvous"
)

// staticcheck: the nil contexts are malformed calls under test, and the
// (error, string) results are a wanted error and its text.
//lint:file-ignore SA1012 a nil context is one of the malformed calls tested
//lint:file-ignore ST1008 the error comes first, then the text that goes with it

// Malformed calls of every exported function and method (issue 13, item
// 7): each must return a comm:-prefixed error that wraps the sentinel
// naming the class of mistake and says what was wrong, promptly; none may
// panic or wait for a timeout. TestMalformedCallsCoverTheAPI reads the
// package's source and fails when an exported function or method has no
// entry here, so a new one cannot be added without its malformed calls.

// malformedDeadline bounds each call. An error caused by it counts as a
// hang: a malformed call must fail at once, not time out.
const malformedDeadline = 10 * time.Second

// receiverCall is a well-formed call of one API taking a *Comm, made on c.
// The receiver variations (nil, zero, closed, non-member communicator,
// nil context) are applied to it by TestMalformedReceivers.
type receiverCall struct {
	call func(ctx context.Context, c *comm.Comm) error
	// accessor: no error result; the call must only not panic (a nil
	// *Comm answers as a communicator this rank is not a member of).
	accessor bool
	// afterClose: the call still works on a closed communicator (reading
	// what it recorded); else it must fail with ErrClosed.
	afterClose bool
	// nonMember: the call works on a group this rank is not a member of;
	// else it must fail with ErrNotMember.
	nonMember bool
}

func buf(n int) []float32 { return make([]float32, n) }

// per is the communicator's size, at least 1: the well-formed calls
// below size their buffers with it, so that they are well-formed on any
// communicator (and read nothing from a nil one).
func per(c *comm.Comm) int { return max(c.Size(), 1) }

// ones is a count of 1 for every rank of c.
func ones(c *comm.Comm) []int {
	counts := make([]int, per(c))
	for i := range counts {
		counts[i] = 1
	}
	return counts
}

// receiverCalls holds every API that takes a *Comm (as its receiver or
// its second parameter).
var receiverCalls = map[string]receiverCall{
	"AllReduce": {call: func(ctx context.Context, c *comm.Comm) error { return comm.AllReduce(ctx, c, buf(2), buf(2), comm.Sum) }},
	"StartAllReduce": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartAllReduce(ctx, c, buf(2), buf(2), comm.Sum).Wait()
	}},
	"InferenceAllReduce": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.InferenceAllReduce(ctx, c, buf(2), buf(2), comm.Max)
	}},
	"StartInferenceAllReduce": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartInferenceAllReduce(ctx, c, buf(2), buf(2), comm.Max).Wait()
	}},
	"Reduce": {call: func(ctx context.Context, c *comm.Comm) error { return comm.Reduce(ctx, c, buf(2), buf(2), comm.Sum, 0) }},
	"StartReduce": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartReduce(ctx, c, buf(2), buf(2), comm.Sum, 0).Wait()
	}},
	"Broadcast":      {call: func(ctx context.Context, c *comm.Comm) error { return comm.Broadcast(ctx, c, buf(2), 0) }},
	"StartBroadcast": {call: func(ctx context.Context, c *comm.Comm) error { return comm.StartBroadcast(ctx, c, buf(2), 0).Wait() }},
	"AllGather": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.AllGather(ctx, c, buf(1), buf(per(c)))
	}},
	"StartAllGather": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartAllGather(ctx, c, buf(1), buf(per(c))).Wait()
	}},
	"AllGatherV": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.AllGatherV(ctx, c, buf(1), buf(per(c)), ones(c))
	}},
	"StartAllGatherV": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartAllGatherV(ctx, c, buf(1), buf(per(c)), ones(c)).Wait()
	}},
	"Gather": {call: func(ctx context.Context, c *comm.Comm) error { return comm.Gather(ctx, c, buf(1), buf(per(c)), 0) }},
	"StartGather": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartGather(ctx, c, buf(1), buf(per(c)), 0).Wait()
	}},
	"GatherV": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.GatherV(ctx, c, buf(1), buf(per(c)), ones(c), 0)
	}},
	"StartGatherV": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartGatherV(ctx, c, buf(1), buf(per(c)), ones(c), 0).Wait()
	}},
	"Scatter": {call: func(ctx context.Context, c *comm.Comm) error { return comm.Scatter(ctx, c, buf(per(c)), buf(1), 0) }},
	"StartScatter": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartScatter(ctx, c, buf(per(c)), buf(1), 0).Wait()
	}},
	"ScatterV": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.ScatterV(ctx, c, buf(per(c)), buf(1), ones(c), 0)
	}},
	"StartScatterV": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartScatterV(ctx, c, buf(per(c)), buf(1), ones(c), 0).Wait()
	}},
	"ReduceScatter": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.ReduceScatter(ctx, c, buf(per(c)), buf(1), comm.Sum)
	}},
	"StartReduceScatter": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartReduceScatter(ctx, c, buf(per(c)), buf(1), comm.Sum).Wait()
	}},
	"ReduceScatterV": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.ReduceScatterV(ctx, c, buf(per(c)), buf(1), ones(c), comm.Sum)
	}},
	"StartReduceScatterV": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartReduceScatterV(ctx, c, buf(per(c)), buf(1), ones(c), comm.Sum).Wait()
	}},
	"AllToAll": {call: func(ctx context.Context, c *comm.Comm) error { return comm.AllToAll(ctx, c, buf(per(c)), buf(per(c))) }},
	"StartAllToAll": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartAllToAll(ctx, c, buf(per(c)), buf(per(c))).Wait()
	}},
	"AllToAllV": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.AllToAllV(ctx, c, buf(per(c)), buf(per(c)), ones(c), ones(c))
	}},
	"StartAllToAllV": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartAllToAllV(ctx, c, buf(per(c)), buf(per(c)), ones(c), ones(c)).Wait()
	}},
	"Barrier":      {call: comm.Barrier},
	"StartBarrier": {call: func(ctx context.Context, c *comm.Comm) error { return comm.StartBarrier(ctx, c).Wait() }},
	"MonitoredBarrier": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.MonitoredBarrier(ctx, c, time.Second, true)
	}},
	"StartMonitoredBarrier": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartMonitoredBarrier(ctx, c, time.Second, true).Wait()
	}},
	"AllReduceCoalesced": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.AllReduceCoalesced(ctx, c, [][]float32{buf(1), buf(3)}, comm.Sum)
	}},
	"StartAllReduceCoalesced": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartAllReduceCoalesced(ctx, c, [][]float32{buf(1), buf(3)}, comm.Sum).Wait()
	}},
	"AllGatherCoalesced": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.AllGatherCoalesced(ctx, c, [][]float32{buf(1)}, [][]float32{buf(per(c))})
	}},
	"StartAllGatherCoalesced": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartAllGatherCoalesced(ctx, c, [][]float32{buf(1)}, [][]float32{buf(per(c))}).Wait()
	}},
	"Send":      {call: func(ctx context.Context, c *comm.Comm) error { return comm.Send(ctx, c, buf(2), 1, 0) }},
	"StartSend": {call: func(ctx context.Context, c *comm.Comm) error { return comm.StartSend(ctx, c, buf(2), 1, 0).Wait() }},
	"Recv": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := comm.Recv(ctx, c, buf(2), 1, 0)
		return err
	}},
	"StartRecv": {call: func(ctx context.Context, c *comm.Comm) error { return comm.StartRecv(ctx, c, buf(2), 1, 0).Wait() }},
	"RecvUpTo": {call: func(ctx context.Context, c *comm.Comm) error {
		_, _, err := comm.RecvUpTo(ctx, c, buf(2), 1, 0)
		return err
	}},
	"StartRecvUpTo": {call: func(ctx context.Context, c *comm.Comm) error { return comm.StartRecvUpTo(ctx, c, buf(2), 1, 0).Wait() }},
	"StartBatchSendRecv": {call: func(ctx context.Context, c *comm.Comm) error {
		return comm.StartBatchSendRecv(ctx, c, []comm.P2POp[float32]{{Send: true, Buf: buf(2), Peer: 1}}).Wait()
	}},
	"AllocShared": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := comm.AllocShared[float32](ctx, c, 8)
		return err
	}},
	// FreeShared needs no peer: it works on a closed communicator (the
	// memory outlives it).
	"FreeShared": {afterClose: true, call: func(ctx context.Context, c *comm.Comm) error { return comm.FreeShared(c, buf(8)) }},
	"IsShared":   {accessor: true, call: func(ctx context.Context, c *comm.Comm) error { comm.IsShared(c, buf(8)); return nil }},
	"NewOp": {nonMember: true, call: func(ctx context.Context, c *comm.Comm) error {
		_, err := comm.NewOp(c, "max", func(inout, in []float32) {}, true)
		return err
	}},
	"PreMulSum": {nonMember: true, call: func(ctx context.Context, c *comm.Comm) error {
		_, err := comm.PreMulSum(c, float32(0.5))
		return err
	}},
	"Comm.FreeOp": {nonMember: true, call: func(ctx context.Context, c *comm.Comm) error {
		op, err := comm.PreMulSum(c, float32(0.5))
		if err != nil {
			return err
		}
		return c.FreeOp(op)
	}},
	"Comm.NewGroup": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := c.NewGroup(ctx, []int{0})
		return err
	}},
	"Comm.Split": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := c.Split(ctx, 0, 0)
		return err
	}},
	"Comm.SplitByHost": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := c.SplitByHost(ctx)
		return err
	}},
	"Comm.GlobalRank": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := c.GlobalRank(0)
		return err
	}, afterClose: true, nonMember: true},
	"Comm.Close": {call: func(ctx context.Context, c *comm.Comm) error { return c.Close() }, afterClose: true, nonMember: true},
	// The straggler report is a collective (it fails on a closed Comm)
	// only in builds with the comms logger; without it (-tags
	// gocomm_noprofile) both calls report an empty log locally.
	"Profiler.LogSummary": {nonMember: true, afterClose: !comm.ProfileCompiledIn, call: func(ctx context.Context, c *comm.Comm) error {
		return c.Profiler().LogSummary(ctx, &bytes.Buffer{}, true)
	}},
	"Profiler.StragglerReport": {nonMember: true, afterClose: !comm.ProfileCompiledIn, call: func(ctx context.Context, c *comm.Comm) error {
		_, err := c.Profiler().StragglerReport(ctx)
		return err
	}},
	"Profiler.WriteJSON":  {call: func(ctx context.Context, c *comm.Comm) error { return c.Profiler().WriteJSON(&bytes.Buffer{}) }, afterClose: true, nonMember: true},
	"Profiler.WriteTrace": {call: func(ctx context.Context, c *comm.Comm) error { return c.Profiler().WriteTrace(&bytes.Buffer{}) }, afterClose: true, nonMember: true},
	"Profiler.WriteTraceFile": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := c.Profiler().WriteTraceFile(filepath.Join(os.TempDir(), fmt.Sprintf("gocomm-malformed-%d", os.Getpid())))
		return err
	}, afterClose: true, nonMember: true},

	// Accessors: no error to return; they must not panic on any
	// communicator, and a nil one answers as a non-member would.
	"Comm.Rank":                accessor(func(c *comm.Comm) { _ = c.Rank() }),
	"Comm.Size":                accessor(func(c *comm.Comm) { _ = c.Size() }),
	"Comm.LocalRank":           accessor(func(c *comm.Comm) { _ = c.LocalRank() }),
	"Comm.LocalSize":           accessor(func(c *comm.Comm) { _ = c.LocalSize() }),
	"Comm.IsMember":            accessor(func(c *comm.Comm) { _ = c.IsMember() }),
	"Comm.GroupRank":           accessor(func(c *comm.Comm) { _ = c.GroupRank(-7) }),
	"Comm.Ranks":               accessor(func(c *comm.Comm) { _ = c.Ranks() }),
	"Comm.Store":               accessor(func(c *comm.Comm) { _ = c.Store() }),
	"Comm.Backend":             accessor(func(c *comm.Comm) { _ = c.Backend() }),
	"Comm.Supports":            accessor(func(c *comm.Comm) { _ = c.Supports(comm.Capability(250)) }),
	"Comm.NodeRank":            accessor(func(c *comm.Comm) { _ = c.NodeRank() }),
	"Comm.NodeCount":           accessor(func(c *comm.Comm) { _ = c.NodeCount() }),
	"Profiler.Enabled":         accessor(func(c *comm.Comm) { _ = c.Profiler().Enabled() }),
	"Profiler.Records":         accessor(func(c *comm.Comm) { _ = c.Profiler().Records() }),
	"Profiler.Reset":           accessor(func(c *comm.Comm) { c.Profiler().Reset() }),
	"FlightRecorder.Snapshot":  accessor(func(c *comm.Comm) { _ = c.FlightRecorder().Snapshot() }),
	"FlightRecorder.DebugAddr": accessor(func(c *comm.Comm) { _ = c.FlightRecorder().DebugAddr() }),
	"Comm.Profiler":            accessor(func(c *comm.Comm) { _ = c.Profiler() }),
	"Comm.FlightRecorder":      accessor(func(c *comm.Comm) { _ = c.FlightRecorder() }),
	"Comm.Abort":               accessor(func(c *comm.Comm) { c.Abort(nil) }),
	// Shrink needs a store, which NewLocalWorld's worlds lack; so its
	// well-formed call fails on them ("Comm.Shrink" in malformedCases),
	// but after the receiver checks.
	"Comm.Shrink": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := c.Shrink(ctx)
		return err
	}},
	// Grow and Joiners need a store too (as Shrink).
	"Comm.Grow": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := c.Grow(ctx)
		return err
	}},
	"Comm.Joiners": {call: func(ctx context.Context, c *comm.Comm) error {
		_, err := c.Joiners(ctx)
		return err
	}},
}

func accessor(f func(c *comm.Comm)) receiverCall {
	return receiverCall{call: func(_ context.Context, c *comm.Comm) error { f(c); return nil },
		accessor: true, afterClose: true, nonMember: true}
}

// malformedCase is one malformed call. It runs on a world of two ranks:
// rank 0 makes the call with bad true; for a collective, rank 1 makes the
// matching well-formed call (bad false) at the same time and must fail
// promptly too, with any comm: error, instead of waiting for rank 0.
type malformedCase struct {
	api  string // as TestMalformedCallsCoverTheAPI names it
	what string
	// want is the sentinel rank 0's error must wrap, and says a
	// substring its message must contain (what to fix).
	want error
	says string
	// collective: rank 1 makes the good call; else rank 1 makes none,
	// or calls peer when set.
	collective bool
	peer       func(ctx context.Context, c *comm.Comm) error
	// mismatch: the two ranks' calls are each well-formed but disagree;
	// the rank that sees it reports want, and the other may finish
	// first if it needed nothing more (neither may wait for a timeout).
	mismatch bool
	// noError: the function has no error to return (WithLogName takes a
	// nil context as context.Background(), Work.Source answers -1); the
	// call returns an error only if the answer is wrong, and must not
	// panic.
	noError bool
	call    func(ctx context.Context, c *comm.Comm, bad bool) error
}

// pick returns bad's value on the malformed rank and good's elsewhere.
func pick[T any](isBad bool, bad, good T) T {
	if isBad {
		return bad
	}
	return good
}

var malformedCases = []malformedCase{
	// Reducing collectives: lengths, buffers, ops.
	{api: "AllReduce", what: "len(send) != len(recv)", want: comm.ErrInvalid, says: "len(send) = 3 but len(recv) = 2", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.AllReduce(ctx, c, buf(pick(bad, 3, 2)), buf(2), comm.Sum)
		}},
	{api: "AllReduce", what: "overlapping send and recv", want: comm.ErrInvalid, says: "overlap", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			b := buf(3)
			if bad {
				return comm.AllReduce(ctx, c, b[:2], b[1:], comm.Sum)
			}
			return comm.AllReduce(ctx, c, b[:2], b[:2], comm.Sum)
		}},
	{api: "AllReduce", what: "bitwise op on floats", want: comm.ErrInvalid, says: "integer type", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.AllReduce(ctx, c, buf(2), buf(2), pick(bad, comm.BAnd, comm.Sum))
		}},
	{api: "AllReduce", what: "an op number that names no op", want: comm.ErrInvalid, says: "unknown reduce op", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.AllReduce(ctx, c, buf(2), buf(2), pick(bad, comm.ReduceOp(40), comm.Sum))
		}},
	{api: "AllReduce", what: "a user op handle never made", want: comm.ErrInvalid, says: "not a live op", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.AllReduce(ctx, c, buf(2), buf(2), pick(bad, comm.ReduceOp(200), comm.Sum))
		}},
	{api: "AllReduce", what: "a user op made for another type", want: comm.ErrInvalid, says: "was made for", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			op, err := comm.NewOp(c, "imax", func(inout, in []int32) {}, true)
			if err != nil {
				return err
			}
			return comm.AllReduce(ctx, c, buf(2), buf(2), pick(bad, op, comm.Sum))
		}},
	{api: "AllReduce", what: "lengths that differ across ranks", mismatch: true, want: comm.ErrMismatch, says: "", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			n := pick(bad, 3, 2)
			return comm.AllReduce(ctx, c, buf(n), buf(n), comm.Sum)
		}},
	{api: "AllReduce", what: "ops that differ across ranks", mismatch: true, want: comm.ErrMismatch, says: "", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.AllReduce(ctx, c, buf(2), buf(2), pick(bad, comm.Max, comm.Sum))
		}},
	{api: "AllReduce", what: "element types that differ across ranks", mismatch: true, want: comm.ErrMismatch, says: "", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			if bad {
				return comm.AllReduce(ctx, c, make([]int32, 2), make([]int32, 2), comm.Sum)
			}
			return comm.AllReduce(ctx, c, buf(2), buf(2), comm.Sum)
		}},
	{api: "StartAllReduce", what: "bitwise op on floats", want: comm.ErrInvalid, says: "integer type", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartAllReduce(ctx, c, buf(2), buf(2), pick(bad, comm.BXor, comm.Sum)).Wait()
		}},
	{api: "InferenceAllReduce", what: "len(send) != len(recv)", want: comm.ErrInvalid, says: "len(send) = 1 but len(recv) = 2", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.InferenceAllReduce(ctx, c, buf(pick(bad, 1, 2)), buf(2), comm.Sum)
		}},
	{api: "StartInferenceAllReduce", what: "nil recv", want: comm.ErrInvalid, says: "len(recv) = 0", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartInferenceAllReduce(ctx, c, buf(2), pick(bad, nil, buf(2)), comm.Sum).Wait()
		}},
	{api: "Reduce", what: "negative root", want: comm.ErrInvalid, says: "root -1 out of range", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.Reduce(ctx, c, buf(2), buf(2), comm.Sum, pick(bad, -1, 0))
		}},
	{api: "Reduce", what: "root == Size()", want: comm.ErrInvalid, says: "root 2 out of range [0,2)", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.Reduce(ctx, c, buf(2), buf(2), comm.Sum, pick(bad, 2, 0))
		}},
	{api: "Reduce", what: "short recv on the root", want: comm.ErrInvalid, says: "len(recv) = 1", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.Reduce(ctx, c, buf(2), buf(pick(bad, 1, 2)), comm.Sum, 0)
		}},
	{api: "StartReduce", what: "bitwise op on floats", want: comm.ErrInvalid, says: "integer type", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartReduce(ctx, c, buf(2), buf(2), pick(bad, comm.BOr, comm.Sum), 0).Wait()
		}},
	{api: "Broadcast", what: "huge root", want: comm.ErrInvalid, says: "out of range", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.Broadcast(ctx, c, buf(2), pick(bad, int(^uint(0)>>1), 0))
		}},
	{api: "StartBroadcast", what: "negative root", want: comm.ErrInvalid, says: "root -3", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartBroadcast(ctx, c, buf(2), pick(bad, -3, 0)).Wait()
		}},
	{api: "AllGather", what: "recv not Size()*len(send)", want: comm.ErrInvalid, says: "want Size()*len(send)", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.AllGather(ctx, c, buf(2), buf(pick(bad, 3, 4)))
		}},
	{api: "AllGather", what: "send overlapping another rank's block", want: comm.ErrInvalid, says: "not this rank's block", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			all := buf(4)
			return comm.AllGather(ctx, c, all[pick(bad, 1, 2*c.Rank()):][:2], all)
		}},
	{api: "StartAllGather", what: "nil recv", want: comm.ErrInvalid, says: "len(recv) = 0", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartAllGather(ctx, c, buf(2), pick(bad, nil, buf(4))).Wait()
		}},
	{api: "AllGatherV", what: "nil counts", want: comm.ErrInvalid, says: "len(counts) = 0, want one count per rank (2)", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.AllGatherV(ctx, c, buf(1), buf(2), pick(bad, nil, []int{1, 1}))
		}},
	{api: "AllGatherV", what: "a negative count", want: comm.ErrInvalid, says: "counts[1] = -1 is negative", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.AllGatherV(ctx, c, buf(1), buf(2), pick(bad, []int{1, -1}, []int{1, 1}))
		}},
	{api: "AllGatherV", what: "counts that overflow int", want: comm.ErrInvalid, says: "counts add up to more than an int holds", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			big := int(^uint(0) >> 1)
			return comm.AllGatherV(ctx, c, buf(1), buf(2), pick(bad, []int{1, big}, []int{1, 1}))
		}},
	{api: "AllGatherV", what: "counts that differ across ranks", mismatch: true, want: comm.ErrMismatch, says: "", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			counts := pick(bad, []int{1, 2}, []int{1, 1})
			return comm.AllGatherV(ctx, c, buf(counts[c.Rank()]), buf(counts[0]+counts[1]), counts)
		}},
	{api: "StartAllGatherV", what: "len(send) != counts[rank]", want: comm.ErrInvalid, says: "len(send) = 2 but counts[0] = 1", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartAllGatherV(ctx, c, buf(pick(bad, 2, 1)), buf(2), []int{1, 1}).Wait()
		}},
	{api: "Gather", what: "root out of range", want: comm.ErrInvalid, says: "root 9 out of range", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.Gather(ctx, c, buf(1), buf(2), pick(bad, 9, 0))
		}},
	{api: "StartGather", what: "short recv on the root", want: comm.ErrInvalid, says: "on the root len(recv) = 1", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartGather(ctx, c, buf(1), buf(pick(bad, 1, 2)), 0).Wait()
		}},
	{api: "GatherV", what: "a negative count", want: comm.ErrInvalid, says: "counts[0] = -2 is negative", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.GatherV(ctx, c, buf(1), buf(2), pick(bad, []int{-2, 1}, []int{1, 1}), 0)
		}},
	{api: "StartGatherV", what: "negative root", want: comm.ErrInvalid, says: "root -1", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartGatherV(ctx, c, buf(1), buf(2), []int{1, 1}, pick(bad, -1, 0)).Wait()
		}},
	{api: "Scatter", what: "send not Size()*len(recv) on the root", want: comm.ErrInvalid, says: "on the root len(send) = 3", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.Scatter(ctx, c, buf(pick(bad, 3, 2)), buf(1), 0)
		}},
	{api: "StartScatter", what: "root out of range", want: comm.ErrInvalid, says: "root 5", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartScatter(ctx, c, buf(2), buf(1), pick(bad, 5, 0)).Wait()
		}},
	{api: "ScatterV", what: "one count for two ranks", want: comm.ErrInvalid, says: "len(counts) = 1", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.ScatterV(ctx, c, buf(2), buf(1), pick(bad, []int{1}, []int{1, 1}), 0)
		}},
	{api: "StartScatterV", what: "len(recv) != counts[rank]", want: comm.ErrInvalid, says: "len(recv) = 0 but counts[0] = 1", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartScatterV(ctx, c, buf(2), buf(pick(bad, 0, 1)), []int{1, 1}, 0).Wait()
		}},
	{api: "ReduceScatter", what: "send not Size()*len(recv)", want: comm.ErrInvalid, says: "want Size()*len(recv)", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.ReduceScatter(ctx, c, buf(pick(bad, 3, 2)), buf(1), comm.Sum)
		}},
	{api: "StartReduceScatter", what: "bitwise op on floats", want: comm.ErrInvalid, says: "integer type", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartReduceScatter(ctx, c, make([]float64, 2), make([]float64, 1), pick(bad, comm.BAnd, comm.Sum)).Wait()
		}},
	{api: "ReduceScatterV", what: "len(send) != sum(counts)", want: comm.ErrInvalid, says: "len(send) = 1 but sum(counts) = 2", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.ReduceScatterV(ctx, c, buf(pick(bad, 1, 2)), buf(1), []int{1, 1}, comm.Sum)
		}},
	{api: "StartReduceScatterV", what: "nil counts", want: comm.ErrInvalid, says: "len(counts) = 0", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartReduceScatterV(ctx, c, buf(2), buf(1), pick(bad, nil, []int{1, 1}), comm.Sum).Wait()
		}},
	{api: "AllToAll", what: "length not a multiple of Size()", want: comm.ErrInvalid, says: "not a multiple of Size() = 2", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			n := pick(bad, 3, 2)
			return comm.AllToAll(ctx, c, buf(n), buf(n))
		}},
	{api: "StartAllToAll", what: "len(send) != len(recv)", want: comm.ErrInvalid, says: "len(send) = 4 but len(recv) = 2", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartAllToAll(ctx, c, buf(pick(bad, 4, 2)), buf(2)).Wait()
		}},
	{api: "AllToAllV", what: "nil sendCounts", want: comm.ErrInvalid, says: "len(sendCounts) = 0", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.AllToAllV(ctx, c, buf(2), buf(2), pick(bad, nil, []int{1, 1}), []int{1, 1})
		}},
	{api: "AllToAllV", what: "own block of two sizes", want: comm.ErrInvalid, says: "this rank's block to itself", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			if bad {
				return comm.AllToAllV(ctx, c, buf(3), buf(2), []int{2, 1}, []int{1, 1})
			}
			return comm.AllToAllV(ctx, c, buf(2), buf(2), []int{1, 1}, []int{1, 1})
		}},
	{api: "AllToAllV", what: "split sizes that disagree across ranks", mismatch: true, want: comm.ErrLength, says: "", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			if bad { // sends 2 to rank 1, which expects 1
				return comm.AllToAllV(ctx, c, buf(3), buf(2), []int{1, 2}, []int{1, 1})
			}
			return comm.AllToAllV(ctx, c, buf(2), buf(2), []int{1, 1}, []int{1, 1})
		}},
	{api: "StartAllToAllV", what: "negative recvCounts", want: comm.ErrInvalid, says: "recvCounts[1] = -1", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartAllToAllV(ctx, c, buf(2), buf(2), []int{1, 1}, pick(bad, []int{1, -1}, []int{1, 1})).Wait()
		}},
	{api: "MonitoredBarrier", what: "zero timeout", want: comm.ErrInvalid, says: "timeout 0s, want > 0", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.MonitoredBarrier(ctx, c, pick(bad, time.Duration(0), time.Second), true)
		}},
	{api: "StartMonitoredBarrier", what: "negative timeout", want: comm.ErrInvalid, says: "timeout -1s", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartMonitoredBarrier(ctx, c, pick(bad, -time.Second, time.Second), false).Wait()
		}},
	{api: "Barrier", what: "a barrier against an all-reduce", mismatch: true, want: comm.ErrMismatch, says: "", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			if bad {
				return comm.Barrier(ctx, c)
			}
			return comm.AllReduce(ctx, c, buf(2), buf(2), comm.Sum)
		}},
	{api: "StartBarrier", what: "nil context", want: comm.ErrInvalid, says: "nil context", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartBarrier(pick(bad, nilContext, ctx), c).Wait()
		}},
	{api: "AllReduceCoalesced", what: "bitwise op on floats", want: comm.ErrInvalid, says: "integer type", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.AllReduceCoalesced(ctx, c, [][]float32{buf(1), nil, buf(2)}, pick(bad, comm.BAnd, comm.Sum))
		}},
	{api: "StartAllReduceCoalesced", what: "an op number that names no op", want: comm.ErrInvalid, says: "unknown reduce op", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartAllReduceCoalesced(ctx, c, [][]float32{buf(1)}, pick(bad, comm.ReduceOp(63), comm.Sum)).Wait()
		}},
	{api: "AllGatherCoalesced", what: "fewer recvs than sends", want: comm.ErrInvalid, says: "2 send buffers but 1 receive buffers", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			if bad {
				return comm.AllGatherCoalesced(ctx, c, [][]float32{buf(1), buf(1)}, [][]float32{buf(2)})
			}
			return comm.AllGatherCoalesced(ctx, c, [][]float32{buf(1), buf(1)}, [][]float32{buf(2), buf(2)})
		}},
	{api: "StartAllGatherCoalesced", what: "a recv of the wrong length", want: comm.ErrInvalid, says: "len(recvs[0]) = 1", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return comm.StartAllGatherCoalesced(ctx, c, [][]float32{buf(1)}, [][]float32{buf(pick(bad, 1, 2))}).Wait()
		}},

	// Point to point: checked on the calling rank only.
	{api: "Send", what: "negative destination", want: comm.ErrInvalid, says: "peer rank -1 out of range [0,2)",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error { return comm.Send(ctx, c, buf(1), -1, 0) }},
	{api: "Send", what: "AnySource as destination", want: comm.ErrInvalid, says: "out of range",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error {
			return comm.Send(ctx, c, buf(1), comm.AnySource, 0)
		}},
	{api: "Send", what: "this rank as destination", want: comm.ErrInvalid, says: "is this rank",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error { return comm.Send(ctx, c, buf(1), 0, 0) }},
	{api: "Send", what: "negative tag", want: comm.ErrInvalid, says: "tag -1 is negative",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error { return comm.Send(ctx, c, buf(1), 1, -1) }},
	{api: "StartSend", what: "destination == Size()", want: comm.ErrInvalid, says: "peer rank 2 out of range",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error {
			return comm.StartSend(ctx, c, buf(1), 2, 0).Wait()
		}},
	{api: "Recv", what: "source -2", want: comm.ErrInvalid, says: "peer rank -2 out of range",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error {
			_, err := comm.Recv(ctx, c, buf(1), -2, 0)
			return err
		}},
	{api: "Recv", what: "negative tag", want: comm.ErrInvalid, says: "tag -5 is negative",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error {
			_, err := comm.Recv(ctx, c, buf(1), comm.AnySource, -5)
			return err
		}},
	{api: "StartRecv", what: "this rank as source", want: comm.ErrInvalid, says: "is this rank",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error {
			return comm.StartRecv(ctx, c, buf(1), 0, 0).Wait()
		}},
	{api: "RecvUpTo", what: "source out of range", want: comm.ErrInvalid, says: "peer rank 7",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error {
			_, _, err := comm.RecvUpTo(ctx, c, buf(1), 7, 0)
			return err
		}},
	{api: "StartRecvUpTo", what: "nil context", want: comm.ErrInvalid, says: "nil context",
		call: func(_ context.Context, c *comm.Comm, _ bool) error {
			return comm.StartRecvUpTo(nilContext, c, buf(1), 1, 0).Wait()
		}},
	{api: "StartBatchSendRecv", what: "AnySource in a batch", want: comm.ErrInvalid, says: "not AnySource",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error {
			return comm.StartBatchSendRecv(ctx, c, []comm.P2POp[float32]{{Buf: buf(1), Peer: comm.AnySource}}).Wait()
		}},
	{api: "StartBatchSendRecv", what: "peer out of range", want: comm.ErrInvalid, says: "peer rank 4",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error {
			return comm.StartBatchSendRecv(ctx, c, []comm.P2POp[float32]{{Send: true, Buf: buf(1), Peer: 4}}).Wait()
		}},

	// Shared allocations.
	{api: "AllocShared", what: "a negative length", want: comm.ErrInvalid, says: "pass n >= 0", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := comm.AllocShared[float32](ctx, c, pick(bad, -1, 4))
			return err
		}},
	{api: "AllocShared", what: "lengths that differ across ranks", mismatch: true, want: comm.ErrMismatch, says: "pass the same n on every rank", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := comm.AllocShared[float32](ctx, c, pick(bad, 5, 4))
			return err
		}},

	// Ops.
	{api: "NewOp", what: "nil function", want: comm.ErrInvalid, says: "the function is nil",
		call: func(_ context.Context, c *comm.Comm, _ bool) error {
			_, err := comm.NewOp[float32](c, "nil", nil, true)
			return err
		}},
	{api: "Comm.FreeOp", what: "the same op twice", want: comm.ErrInvalid, says: "not a live op",
		call: func(_ context.Context, c *comm.Comm, _ bool) error {
			op, err := comm.NewOp(c, "first", func(inout, in []float32) {}, true)
			if err != nil {
				return err
			}
			if err := c.FreeOp(op); err != nil {
				return fmt.Errorf("the first FreeOp failed: %w", err)
			}
			return c.FreeOp(op)
		}},
	{api: "Comm.FreeOp", what: "a built-in op", want: comm.ErrInvalid, says: "not a live op made by NewOp",
		call: func(_ context.Context, c *comm.Comm, _ bool) error { return c.FreeOp(comm.Sum) }},
	{api: "PreMulSum", what: "a world out of handles", want: comm.ErrInvalid, says: "FreeOp those no longer used",
		call: func(_ context.Context, c *comm.Comm, _ bool) error {
			for {
				if _, err := comm.PreMulSum(c, int8(2)); err != nil {
					return err
				}
			}
		}},

	// Communicators.
	{api: "Comm.GlobalRank", what: "negative rank", want: comm.ErrInvalid, says: "GlobalRank(-1): rank out of range [0,2)",
		call: func(_ context.Context, c *comm.Comm, _ bool) error { _, err := c.GlobalRank(-1); return err }},
	{api: "Comm.GlobalRank", what: "rank == Size()", want: comm.ErrInvalid, says: "GlobalRank(2)",
		call: func(_ context.Context, c *comm.Comm, _ bool) error { _, err := c.GlobalRank(2); return err }},
	{api: "Comm.NewGroup", what: "no ranks", want: comm.ErrInvalid, says: "no ranks given", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := c.NewGroup(ctx, pick(bad, nil, []int{0, 1}))
			return err
		}},
	{api: "Comm.NewGroup", what: "a rank twice", want: comm.ErrInvalid, says: "rank 1 listed twice", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := c.NewGroup(ctx, pick(bad, []int{1, 1}, []int{0, 1}))
			return err
		}},
	{api: "Comm.NewGroup", what: "a rank out of range", want: comm.ErrInvalid, says: "rank -4 out of range", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := c.NewGroup(ctx, pick(bad, []int{0, -4}, []int{0, 1}))
			return err
		}},
	{api: "Comm.NewGroup", what: "rank lists that differ across ranks", mismatch: true, want: comm.ErrMismatch, says: "different rank list", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := c.NewGroup(ctx, pick(bad, []int{1, 0}, []int{0, 1}))
			return err
		}},
	{api: "Comm.Split", what: "nil context", want: comm.ErrInvalid, says: "nil context", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := c.Split(pick(bad, nilContext, ctx), 1<<30, -1<<30)
			return err
		}},
	{api: "Comm.Split", what: "a collective on the non-member of an empty split", want: comm.ErrNotMember, says: "not a member",
		peer: leaveSplit, call: func(ctx context.Context, c *comm.Comm, _ bool) error {
			// Both ranks leave (color -1): each gets a communicator of
			// size 0 whose collectives must fail, not divide by zero.
			g, err := splitBoth(ctx, c, -1)
			if err != nil {
				return err
			}
			if g.Rank() != -1 || g.IsMember() {
				return fmt.Errorf("color -1 gave rank %d, want a non-member", g.Rank())
			}
			return comm.AllToAll(ctx, g, buf(2), buf(2))
		}},
	{api: "Comm.SplitByHost", what: "nil context", want: comm.ErrInvalid, says: "nil context", collective: true,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := c.SplitByHost(pick(bad, nilContext, ctx))
			return err
		}},
	{api: "Comm.Shrink", what: "a world with no store", want: nil, says: "needs the rendezvous store",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error { _, err := c.Shrink(ctx); return err }},
	{api: "Comm.Grow", what: "a world with no store", want: nil, says: "needs the rendezvous store",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error { _, err := c.Grow(ctx); return err }},
	{api: "Comm.Joiners", what: "a world with no store", want: nil, says: "needs the rendezvous store",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error { _, err := c.Joiners(ctx); return err }},
	{api: "Comm.Abort", what: "a nil error", want: comm.ErrAborted, says: "",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error {
			c.Abort(nil)
			return comm.AllReduce(ctx, c, buf(1), buf(1), comm.Sum)
		}},
	{api: "Comm.Close", what: "closed twice, then used", want: comm.ErrClosed, says: "",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error {
			if err := c.Close(); err != nil {
				return fmt.Errorf("first Close: %w", err)
			}
			if err := c.Close(); err != nil {
				return fmt.Errorf("second Close: %w", err)
			}
			return comm.Send(ctx, c, buf(1), 1, 0)
		}},
	{api: "Profiler.WriteJSON", what: "nil writer", want: comm.ErrInvalid, says: "nil io.Writer",
		call: func(_ context.Context, c *comm.Comm, _ bool) error { return c.Profiler().WriteJSON(nil) }},
	{api: "Profiler.WriteTrace", what: "nil writer", want: comm.ErrInvalid, says: "nil io.Writer",
		call: func(_ context.Context, c *comm.Comm, _ bool) error { return c.Profiler().WriteTrace(nil) }},
	{api: "Profiler.WriteTraceFile", what: "a directory that is a file", want: nil, says: "",
		call: func(_ context.Context, c *comm.Comm, _ bool) error {
			f := filepath.Join(os.TempDir(), fmt.Sprintf("gocomm-malformed-file-%d", os.Getpid()))
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				return err
			}
			defer os.Remove(f)
			_, err := c.Profiler().WriteTraceFile(f)
			return err
		}},
	{api: "Profiler.LogSummary", what: "nil context", want: comm.ErrInvalid, says: "nil context", collective: comm.ProfileCompiledIn,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			return c.Profiler().LogSummary(pick(bad, nilContext, ctx), nil, true)
		}},
	{api: "Profiler.StragglerReport", what: "nil context", want: comm.ErrInvalid, says: "nil context", collective: comm.ProfileCompiledIn,
		call: func(ctx context.Context, c *comm.Comm, bad bool) error {
			_, err := c.Profiler().StragglerReport(pick(bad, nilContext, ctx))
			return err
		}},

	// Handles and functions without a communicator.
	{api: "Work.Wait", what: "a zero Work", want: comm.ErrInvalid, says: "zero Work",
		call: func(context.Context, *comm.Comm, bool) error { return new(comm.Work).Wait() }},
	{api: "Work.Wait", what: "a nil Work", want: comm.ErrInvalid, says: "nil *Work",
		call: func(context.Context, *comm.Comm, bool) error { return (*comm.Work)(nil).Wait() }},
	{api: "Work.Err", what: "a nil Work", want: comm.ErrInvalid, says: "nil *Work",
		call: func(context.Context, *comm.Comm, bool) error { return (*comm.Work)(nil).Err() }},
	{api: "Work.Done", what: "a nil and a zero Work", want: comm.ErrInvalid, says: "zero Work",
		call: func(context.Context, *comm.Comm, bool) error {
			<-(*comm.Work)(nil).Done() // closed: nothing to wait for
			w := new(comm.Work)
			<-w.Done()
			return w.Err()
		}},
	{api: "Work.Source", what: "a nil and a zero Work", noError: true,
		call: func(context.Context, *comm.Comm, bool) error {
			if s, z := (*comm.Work)(nil).Source(), new(comm.Work).Source(); s != -1 || z != -1 {
				return fmt.Errorf("Source: nil %d, zero %d, want -1", s, z)
			}
			return nil
		}},
	{api: "Work.Count", what: "a nil and a zero Work", noError: true,
		call: func(context.Context, *comm.Comm, bool) error {
			if s, z := (*comm.Work)(nil).Count(), new(comm.Work).Count(); s != -1 || z != -1 {
				return fmt.Errorf("Count: nil %d, zero %d, want -1", s, z)
			}
			return nil
		}},
	{api: "WaitAll", what: "nil context", want: comm.ErrInvalid, says: "nil context",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error {
			w := comm.StartRecv(ctx, c, buf(1), 1, 0) // never satisfied
			return comm.WaitAll(nilContext, w)
		}},
	{api: "WaitAll", what: "nil and zero Works", want: comm.ErrInvalid, says: "zero Work",
		call: func(ctx context.Context, _ *comm.Comm, _ bool) error {
			return comm.WaitAll(ctx, nil, new(comm.Work), nil)
		}},
	{api: "WaitAny", what: "only nil Works", want: comm.ErrInvalid, says: "no Work to wait for",
		call: func(ctx context.Context, _ *comm.Comm, _ bool) error {
			_, err := comm.WaitAny(ctx, nil, nil)
			return err
		}},
	{api: "WaitAny", what: "nil context", want: comm.ErrInvalid, says: "nil context",
		call: func(ctx context.Context, c *comm.Comm, _ bool) error {
			w := comm.StartRecv(ctx, c, buf(1), 1, 0)
			_, err := comm.WaitAny(nilContext, w)
			return err
		}},
	{api: "WaitAny", what: "a zero Work", want: comm.ErrInvalid, says: "zero Work",
		call: func(ctx context.Context, _ *comm.Comm, _ bool) error {
			_, err := comm.WaitAny(ctx, new(comm.Work))
			return err
		}},
	{api: "StartFunc", what: "nil function", want: comm.ErrInvalid, says: "nil function",
		call: func(context.Context, *comm.Comm, bool) error { return comm.StartFunc(nil).Wait() }},
	{api: "NewLocalWorld", what: "size 0", want: comm.ErrInvalid, says: "size 0, want >= 1",
		call: func(context.Context, *comm.Comm, bool) error {
			_, err := comm.NewLocalWorld(0, comm.Options{})
			return err
		}},
	{api: "NewLocalWorld", what: "negative timeout", want: comm.ErrInvalid, says: "Timeout",
		call: func(context.Context, *comm.Comm, bool) error {
			_, err := comm.NewLocalWorld(1, comm.Options{Timeout: -time.Second})
			return err
		}},
	{api: "Init", what: "a rank outside the size", want: nil, says: "rank 5",
		call: func(ctx context.Context, _ *comm.Comm, _ bool) error {
			_, err := comm.Init(ctx, comm.Options{Rank: 5, Size: 2, Getenv: noEnv})
			return err
		}},
	{api: "Init", what: "negative size", want: nil, says: "size -1",
		call: func(ctx context.Context, _ *comm.Comm, _ bool) error {
			_, err := comm.Init(ctx, comm.Options{Rank: 0, Size: -1, Getenv: noEnv})
			return err
		}},
	{api: "Init", what: "an unknown backend", want: nil, says: "nope",
		call: func(ctx context.Context, _ *comm.Comm, _ bool) error {
			_, err := comm.Init(ctx, comm.Options{Backend: "nope", Getenv: noEnv})
			return err
		}},
	{api: "Init", what: "an unknown transport", want: nil, says: "bogus",
		call: func(ctx context.Context, _ *comm.Comm, _ bool) error {
			_, err := comm.Init(ctx, comm.Options{Transport: comm.TransportOptions{Kind: "bogus"}, Getenv: noEnv})
			return err
		}},
	{api: "Init", what: "negative timeout", want: nil, says: "imeout",
		call: func(ctx context.Context, _ *comm.Comm, _ bool) error {
			_, err := comm.Init(ctx, comm.Options{Timeout: -time.Second, Getenv: noEnv})
			return err
		}},
	{api: "Init", what: "nil context", want: comm.ErrInvalid, says: "nil context",
		call: func(context.Context, *comm.Comm, bool) error {
			_, err := comm.Init(nilContext, comm.Options{Getenv: noEnv})
			return err
		}},
	{api: "Join", what: "nil context", want: comm.ErrInvalid, says: "nil context",
		call: func(context.Context, *comm.Comm, bool) error {
			_, err := comm.Join(nilContext, comm.Options{Getenv: noEnv})
			return err
		}},
	{api: "Join", what: "no meeting place", want: comm.ErrEnvironment, says: "MASTER_ADDR",
		call: func(ctx context.Context, _ *comm.Comm, _ bool) error {
			_, err := comm.Join(ctx, comm.Options{Getenv: noEnv})
			return err
		}},
	{api: "Join", what: "an unknown backend", want: nil, says: "nope",
		call: func(ctx context.Context, _ *comm.Comm, _ bool) error {
			_, err := comm.Join(ctx, comm.Options{Backend: "nope", Store: rendezvous.NewMemStore(), Getenv: noEnv})
			return err
		}},
	{api: "ReadEnvironment", what: "a rank that is not a number", want: comm.ErrEnvironment, says: "RANK",
		call: func(context.Context, *comm.Comm, bool) error {
			_, err := comm.ReadEnvironment(envOf(map[string]string{"RANK": "x", "WORLD_SIZE": "2"}))
			return err
		}},
	{api: "ReadEnvironment", what: "a rank outside the world", want: comm.ErrEnvironment, says: "rank 3 out of range for world size 2",
		call: func(context.Context, *comm.Comm, bool) error {
			_, err := comm.ReadEnvironment(envOf(map[string]string{"RANK": "3", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}))
			return err
		}},
	{api: "WithLogName", what: "nil context", noError: true,
		call: func(context.Context, *comm.Comm, bool) error {
			return noPanicValue(comm.WithLogName(nilContext, "x"))
		}},
	{api: "WithProfiling", what: "nil context", noError: true,
		call: func(context.Context, *comm.Comm, bool) error {
			return noPanicValue(comm.WithProfiling(nilContext, true))
		}},
}

// nilContext is the nil context.Context that malformed calls pass.
var nilContext context.Context

// noPanicValue: a function with no error result passed if it returned.
func noPanicValue(any) error { return nil }

func noEnv(string) string { return "" }

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// splitBoth runs Split with color on c; the other rank of the case's
// world calls leaveSplit meanwhile.
func splitBoth(ctx context.Context, c *comm.Comm, color int) (*comm.Comm, error) {
	return c.Split(ctx, color, 0)
}

// leaveSplit is rank 1's part of the cases that split the world with
// color -1 on both ranks.
func leaveSplit(ctx context.Context, c *comm.Comm) error {
	_, err := splitBoth(ctx, c, -1)
	return err
}

// malformedAllowed are the exported functions and methods with no
// malformed call: each takes nothing a caller could get wrong.
var malformedAllowed = map[string]string{
	"Capabilities":         "no arguments",
	"NewFloat16":           "total: every float32 (NaN, ±Inf, out of range) has a Float16",
	"NewBFloat16":          "total: every float32 has a BFloat16",
	"Float16.Float32":      "total: every bit pattern is a value",
	"BFloat16.Float32":     "total: every bit pattern is a value",
	"TransportKind.String": "total: any string prints as itself, the zero value as auto",
	"DesyncError.Error":    "method of an error value the library makes, never nil",
	"DesyncError.Unwrap":   "method of an error value the library makes, never nil",
}

// exportedAPI is the package's exported API (testkit.ExportedAPI).
func exportedAPI(t *testing.T) map[string]testkit.APIShape {
	t.Helper()
	api, err := testkit.ExportedAPI(".")
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// TestMalformedCallsCoverTheAPI fails when an exported function or method
// of the package has no malformed call: every API taking a *Comm needs a
// receiverCall (the methods of the handles a Comm returns may have one
// too), every other one a malformedCase or a reason in malformedAllowed.
// It also fails on entries naming no API, so that the tables follow
// renames.
func TestMalformedCallsCoverTheAPI(t *testing.T) {
	api := exportedAPI(t)
	cased := map[string]bool{}
	for _, mc := range malformedCases {
		cased[mc.api] = true
	}
	var missing []string
	for name, shape := range api {
		_, recv := receiverCalls[name]
		switch {
		case shape.Comm && !recv:
			missing = append(missing, name+" (takes a *Comm: needs a receiverCalls entry)")
		// The handles' methods (Profiler, FlightRecorder) are reached
		// through a *Comm: their receiverCalls entries cover them.
		case !shape.Comm && !recv && !cased[name] && malformedAllowed[name] == "":
			missing = append(missing, name+" (needs a malformedCases entry, or a reason in malformedAllowed)")
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("exported API without malformed calls:\n\t%s", strings.Join(missing, "\n\t"))
	}
	var stale []string
	for name := range receiverCalls {
		if _, ok := api[name]; !ok {
			stale = append(stale, "receiverCalls "+name)
		}
	}
	for name := range cased {
		if _, ok := api[name]; !ok {
			stale = append(stale, "malformedCases "+name)
		}
	}
	for name := range malformedAllowed {
		if _, ok := api[name]; !ok {
			stale = append(stale, "malformedAllowed "+name)
		}
	}
	slices.Sort(stale)
	if len(stale) > 0 {
		t.Errorf("entries naming no exported function or method: %v", stale)
	}
	if len(api) < 60 {
		t.Fatalf("the scan found only %d exported functions and methods; it must be missing files", len(api))
	}
	t.Logf("%d exported functions and methods: %d receiver calls, %d malformed cases", len(api), len(receiverCalls), len(malformedCases))
}

func malformedWorld(t *testing.T, n int, opts comm.Options) []*comm.Comm {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = time.Minute
	}
	world, err := comm.NewLocalWorld(n, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll(world) })
	return world
}

// TestMalformedCalls runs every malformedCase on a fresh in-process world
// of two ranks: rank 0 makes the malformed call; for a collective rank 1
// makes the well-formed one at the same time, and both must fail promptly.
func TestMalformedCalls(t *testing.T) {
	for _, mc := range malformedCases {
		t.Run(mc.api+"/"+mc.what, func(t *testing.T) {
			world := malformedWorld(t, 2, comm.Options{Profile: &profile.Config{Enabled: true}})
			ctx, cancel := context.WithTimeout(context.Background(), malformedDeadline)
			defer cancel()
			peer := make(chan error, 1)
			switch {
			case mc.collective:
				go func() {
					problem, err := testkit.MalformedOutcome(malformedDeadline, func() error { return mc.call(ctx, world[1], false) })
					if problem != "" {
						err = errors.New(problem)
					}
					peer <- err
				}()
			case mc.peer != nil:
				go func() { peer <- mc.peer(ctx, world[1]) }()
			default:
				peer <- nil
			}
			problem, err := testkit.MalformedOutcome(malformedDeadline, func() error { return mc.call(ctx, world[0], true) })
			if problem != "" {
				t.Fatalf("rank 0: %s", problem)
			}
			perr := <-peer
			switch {
			case mc.noError:
				if err != nil {
					t.Errorf("rank 0: %v", err)
				}
			case mc.mismatch:
				p0, p1 := testkit.CheckMalformedError(err, mc.want, mc.says), testkit.CheckMalformedError(perr, mc.want, mc.says)
				if p0 != "" && p1 != "" {
					t.Errorf("neither rank reported the disagreement:\n\trank 0: %s\n\trank 1: %s", p0, p1)
				}
				for r, e := range []error{err, perr} {
					if e != nil && !strings.HasPrefix(e.Error(), "comm:") {
						t.Errorf("rank %d: error not comm:-prefixed: %v", r, e)
					}
				}
			default:
				if p := testkit.CheckMalformedError(err, mc.want, mc.says); p != "" {
					t.Errorf("rank 0: %s", p)
				}
				if mc.collective {
					checkPeerOfMalformed(ctx, t, world[1], perr)
				} else if perr != nil {
					t.Errorf("rank 1: %v", perr)
				}
			}
			t.Logf("rank 0: %v; rank 1: %v", err, perr)
		})
	}
}

// checkPeerOfMalformed checks the well-formed rank of a collective that
// rank 0 called malformed: it must have returned at once, failed with a
// comm: error, or, when it needed nothing from rank 0 (a non-root of a
// Reduce or a Gather, say) and finished first, found the world aborted by
// rank 0 at its next collective.
func checkPeerOfMalformed(ctx context.Context, t *testing.T, c *comm.Comm, perr error) {
	t.Helper()
	if perr != nil {
		if p := testkit.CheckMalformedError(perr, nil, ""); p != "" {
			t.Errorf("rank 1 (well-formed call): %s", p)
		}
		return
	}
	err := comm.Barrier(ctx, c)
	if !errors.Is(err, comm.ErrAborted) || !strings.Contains(err.Error(), "rank 0") {
		t.Errorf("rank 1 (well-formed call) succeeded, and its next collective did not find the world aborted by rank 0: %v", err)
	}
}

// receiverVariant is a communicator (or context) that no call can use.
// The communicators of worlds come from a world of two ranks, so that
// point-to-point calls have a peer; the other rank makes no call.
type receiverVariant struct {
	name string
	// get returns the communicator to call with.
	get func(t *testing.T) *comm.Comm
	// nilCtx: the call gets a nil context (only APIs that take one).
	nilCtx bool
	// want and says check the answer of a call that returns an error.
	want func(rc receiverCall) (error, string)
}

var receiverVariants = []receiverVariant{
	{name: "nil Comm",
		get:  func(*testing.T) *comm.Comm { return nil },
		want: func(receiverCall) (error, string) { return comm.ErrInvalid, "nil *Comm" }},
	{name: "zero Comm",
		get:  func(*testing.T) *comm.Comm { return new(comm.Comm) },
		want: func(receiverCall) (error, string) { return comm.ErrInvalid, "zero Comm" }},
	{name: "closed Comm",
		get: func(t *testing.T) *comm.Comm {
			world := malformedWorld(t, 2, comm.Options{Profile: &profile.Config{Enabled: true}})
			closeAll(world)
			return world[0]
		},
		want: func(rc receiverCall) (error, string) {
			if rc.afterClose {
				return nil, ""
			}
			return comm.ErrClosed, ""
		}},
	{name: "non-member Comm",
		get: func(t *testing.T) *comm.Comm {
			world := malformedWorld(t, 2, comm.Options{Profile: &profile.Config{Enabled: true}})
			done := make(chan error, 1)
			go func() { _, err := world[0].NewGroup(context.Background(), []int{0}); done <- err }()
			g, err := world[1].NewGroup(context.Background(), []int{0})
			if err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			return g
		},
		want: func(rc receiverCall) (error, string) {
			if rc.nonMember {
				return nil, ""
			}
			return comm.ErrNotMember, ""
		}},
	{name: "nil context", nilCtx: true,
		get: func(t *testing.T) *comm.Comm {
			return malformedWorld(t, 2, comm.Options{Profile: &profile.Config{Enabled: true}})[0]
		},
		want: func(receiverCall) (error, string) { return comm.ErrInvalid, "nil context" }},
}

// TestMalformedReceivers calls every API that takes a *Comm with a nil
// and a zero communicator, a closed one, a non-member's and (for those
// taking a context) a nil context.
func TestMalformedReceivers(t *testing.T) {
	api := exportedAPI(t)
	names := make([]string, 0, len(receiverCalls))
	for name := range receiverCalls {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, v := range receiverVariants {
		for _, name := range names {
			rc := receiverCalls[name]
			if v.nilCtx && !api[name].Context {
				continue
			}
			t.Run(v.name+"/"+name, func(t *testing.T) {
				c := v.get(t)
				ctx, cancel := context.WithTimeout(context.Background(), malformedDeadline)
				defer cancel()
				if v.nilCtx {
					ctx = nil
				}
				problem, err := testkit.MalformedOutcome(malformedDeadline, func() error { return rc.call(ctx, c) })
				if problem != "" {
					t.Fatal(problem)
				}
				want, says := v.want(rc)
				if rc.accessor || (want == nil && v.name != "nil Comm" && v.name != "zero Comm") {
					if err != nil {
						t.Errorf("unexpected error: %v", err)
					}
					return
				}
				if p := testkit.CheckMalformedError(err, want, says); p != "" {
					t.Error(p)
				}
			})
		}
	}
}
