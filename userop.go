package comm

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"unsafe"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
)

// User-defined reductions (MPI_Op_create) and PreMulSum (torch's
// _make_nccl_premul_sum). Each is a ReduceOp handle, usable wherever the
// built-in ops are (AllReduce, Reduce, ReduceScatter(V), the coalesced and
// Start forms), with the element type it was made for.

// ErrOpPanicked is wrapped by the error of a collective whose user-defined
// op panicked on this rank. The rank aborts the collective (and the world,
// as any failure inside a collective does), so every other rank returns an
// error naming it instead of waiting.
var ErrOpPanicked = errors.New("comm: user-defined reduce op panicked")

// maxUserOps is how many user-defined ops a world holds at once.
const maxUserOps = 256 - int(core.FirstUserOp)

// NewOp makes a user-defined reduction op over elements of type T, like
// MPI_Op_create. f(inout, in) must set inout[i] = inout[i] ⊕ in[i] for
// every i, element by element (a collective calls it on pieces of any
// length, several times per call); inout is the left operand. f must not
// modify in, nor keep either slice after it returns, and may be called
// concurrently by collectives in flight.
//
// commutative says a ⊕ b == b ⊕ a. When it is false the result is the
// rank-ordered fold r0 ⊕ r1 ⊕ ... ⊕ rN-1 of the ranks' inputs (⊕ must
// still be associative), and the native backend runs such an op on
// schedules that keep that order (recursive doubling, binomial trees to
// rank 0), whatever algorithm is configured. When it is true, any
// schedule may reorder the operands.
//
// The op belongs to c's world (its groups may use it too). Every rank
// must make (and free) its ops in the same order, so that one op has one
// handle on every rank: ranks compare the handles as they compare the
// other arguments of a collective. A panic in f is recovered on the rank
// where it happened and fails the collective there with ErrOpPanicked (its
// stack is logged), and every rank with an error. The native backend runs
// user-defined ops; the mpi backend refuses them before anything is sent,
// with an error naming the op and the backend that wraps
// backend.ErrUserOpUnsupported (PreMulSum runs everywhere).
func NewOp[T Numeric](c *Comm, name string, f func(inout, in []T), commutative bool) (ReduceOp, error) {
	world, err := c.opWorld("NewOp")
	if err != nil {
		return 0, err
	}
	if f == nil {
		return 0, fmt.Errorf("%w: NewOp %q: the function is nil", ErrInvalid, name)
	}
	u := &userOp{be: backend.UserOp{Name: name, DType: dtypeOf[T](), Commutative: commutative}}
	log := world.log
	u.be.Reduce = func(inout, in []byte) (err error) {
		defer func() {
			if p := recover(); p != nil {
				log.Error("comm: user-defined reduce op panicked", "op", name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				err = fmt.Errorf("%w: op %q: %v", ErrOpPanicked, name, p)
			}
		}()
		f(viewAs[T](inout), viewAs[T](in))
		return nil
	}
	return world.ops.add(u)
}

// PreMulSum makes the op torch calls premul_sum: each rank's input is
// multiplied by scalar, then the products are summed (so PreMulSum(c,
// 1/n) on n ranks averages floats without a separate pass). The input is
// scaled on the caller's goroutine when the collective starts: into a new
// buffer, or, for an in-place call, in place (on an error the buffer may
// hold the scaled input). Float16 and BFloat16 are multiplied in float32
// and rounded once; integers wrap as Go's * does. It runs on every
// backend (as a Sum of the scaled inputs). Like NewOp's, the op belongs to
// c's world and is made in the same order on every rank; FreeOp releases
// it.
func PreMulSum[T Numeric](c *Comm, scalar T) (ReduceOp, error) {
	world, err := c.opWorld("PreMulSum")
	if err != nil {
		return 0, err
	}
	u := &userOp{
		be:    backend.UserOp{Name: fmt.Sprintf("PreMulSum(%v)", scalar), DType: dtypeOf[T](), Commutative: true},
		scale: scaler(scalar),
	}
	return world.ops.add(u)
}

// opWorld is the world whose op table c's ops go to, or why there is
// none: c is nil or a zero Comm (ErrInvalid), or its world is closed.
// A group this rank is not a member of has its world's table.
func (c *Comm) opWorld(op string) (*Comm, error) {
	if err := c.made(op); err != nil {
		return nil, err
	}
	if c.closedNow() {
		return nil, fmt.Errorf("%w: %s", ErrClosed, op)
	}
	return c.root(), nil
}

// FreeOp releases an op made by NewOp or PreMulSum (MPI_Op_free);
// collectives already started with it finish with it. Its handle may be
// handed out again, so free in the same order on every rank.
func (c *Comm) FreeOp(op ReduceOp) error {
	if err := c.made("FreeOp"); err != nil {
		return err
	}
	if !c.root().ops.remove(op) {
		return fmt.Errorf("%w: FreeOp(%v): not a live op made by NewOp or PreMulSum on this world", ErrInvalid, op)
	}
	return nil
}

// userOp is one entry of a world's op table.
type userOp struct {
	be backend.UserOp
	// scale, for PreMulSum, sets dst = src * scalar (raw element bytes,
	// dst may be src); nil for NewOp's ops.
	scale func(dst, src []byte)
}

// opTable holds a world's user-defined ops. The zero value is empty.
type opTable struct {
	mu  sync.Mutex // protects ops
	ops map[ReduceOp]*userOp
}

// add gives u the lowest free handle, so that ranks making and freeing
// ops in one order agree on every handle.
func (t *opTable) add(u *userOp) (ReduceOp, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ops == nil {
		t.ops = make(map[ReduceOp]*userOp)
	}
	for i := 0; i < maxUserOps; i++ {
		op := core.FirstUserOp + ReduceOp(i)
		if t.ops[op] == nil {
			t.ops[op] = u
			return op, nil
		}
	}
	return 0, fmt.Errorf("%w: %q: this world already holds %d user-defined ops; FreeOp those no longer used", ErrInvalid, u.be.Name, maxUserOps)
}

func (t *opTable) get(op ReduceOp) *userOp {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ops[op]
}

func (t *opTable) remove(op ReduceOp) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ops[op] == nil {
		return false
	}
	delete(t.ops, op)
	return true
}

// reduceOp checks op for req, a reducing collective's request whose
// buffers are already checked, and resolves a user-defined op: NewOp's
// goes to the backend in req.User; PreMulSum's scales req.Send (into a new
// buffer unless the call is in place) and runs as a Sum.
func (c *Comm) reduceOp(req *backend.Request, op ReduceOp) error {
	if !op.IsUser() {
		return checkOp(req.Kind, op, req.DType)
	}
	u := c.root().ops.get(op)
	switch {
	case u == nil:
		return invalid(req.Kind, "reduce op %v is not a live op of this world: make it with NewOp or PreMulSum (on every rank, in the same order) and do not use it after FreeOp", op)
	case u.be.DType != req.DType:
		return invalid(req.Kind, "op %q (%v) was made for %v elements, not %v", u.be.Name, op, u.be.DType, req.DType)
	case u.scale != nil:
		if len(req.Send) > 0 && len(req.Send) == len(req.Recv) && &req.Send[0] == &req.Recv[0] {
			u.scale(req.Recv, req.Send)
		} else {
			scaled := make([]byte, len(req.Send))
			u.scale(scaled, req.Send)
			req.Send = scaled
		}
		req.Op = Sum
		return nil
	}
	if err := c.userOps(); err != nil {
		return fmt.Errorf("%w: %v: op %q: %w", ErrInvalid, req.Kind, u.be.Name, err)
	}
	req.User = &u.be
	return nil
}

// scaler returns the function that multiplies raw elements of T by s.
func scaler[T Numeric](s T) func(dst, src []byte) {
	switch dtypeOf[T]() {
	case core.Float16:
		f := (*Float16)(unsafe.Pointer(&s)).Float32()
		return func(dst, src []byte) {
			d, x := viewAs[Float16](dst), viewAs[Float16](src)
			for i := range x {
				d[i] = NewFloat16(x[i].Float32() * f)
			}
		}
	case core.BFloat16:
		f := (*BFloat16)(unsafe.Pointer(&s)).Float32()
		return func(dst, src []byte) {
			d, x := viewAs[BFloat16](dst), viewAs[BFloat16](src)
			for i := range x {
				d[i] = NewBFloat16(x[i].Float32() * f)
			}
		}
	}
	return func(dst, src []byte) {
		d, x := viewAs[T](dst), viewAs[T](src)
		for i := range x {
			d[i] = x[i] * s
		}
	}
}

// viewAs views raw element bytes as elements of T (no copy).
func viewAs[T Numeric](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(z)))
}

// ErrUserOpUnsupported is wrapped by the error of a collective given a
// NewOp op on a backend that does not run user-defined ops (the mpi
// backend); c.Supports(CapUserOps) says beforehand.
var ErrUserOpUnsupported = backend.ErrUserOpUnsupported

// userOps returns nil if collectives on c run ops made by NewOp, else an
// error wrapping ErrUserOpUnsupported that names the backend (Supports'
// answer for CapUserOps). c is a member.
func (c *Comm) userOps() error {
	runner, ok := c.be.(backend.UserOpRunner)
	if !ok {
		return fmt.Errorf("%w: the %T backend does not say it runs them", ErrUserOpUnsupported, c.be)
	}
	return runner.UserOps()
}
