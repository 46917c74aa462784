package ddp

import (
	"context"
	"fmt"
	"sync"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/onebit"
)

// AllReduceHook is the default hook, DDP's allreduce_hook: one in-place
// comm.StartAllReduce of the bucket with comm.Avg, which every element
// type supports (integers truncate the average toward zero; Float16 and
// BFloat16 are summed in float32, rounded to 16 bits after each addition,
// and divided once at the end).
func AllReduceHook[T comm.Numeric]() Hook[T] {
	return func(ctx context.Context, c *comm.Comm, b *Bucket[T]) *comm.Work {
		if b == nil {
			return nilBucket()
		}
		return comm.StartAllReduce(ctx, c, b.Data, b.Data, comm.Avg)
	}
}

// nilBucket is the Work of a hook called with a nil *Bucket, which only a
// caller other than the Reducer can pass.
func nilBucket() *comm.Work {
	return comm.StartFunc(func() error {
		return fmt.Errorf("%w: ddp: a hook called with a nil *Bucket", comm.ErrInvalid)
	})
}

// FP16CompressHook is DDP's fp16_compress_hook for float32 gradients: each
// bucket is divided by the number of ranks (in float32), rounded to
// comm.Float16, all-reduced with comm.Sum and widened back into the bucket,
// halving the bytes sent. The sum is computed as comm sums Float16: each
// addition in float32, rounded to float16. Torch rounds to float16 before
// it divides; dividing first rounds once and keeps gradients up to N times
// the float16 maximum finite.
//
// The hook keeps a float16 copy of each bucket between steps; use one per
// Reducer.
func FP16CompressHook() Hook[float32] {
	return compressHook(comm.NewFloat16, comm.Float16.Float32)
}

// BF16CompressHook is FP16CompressHook with comm.BFloat16 (DDP's
// bf16_compress_hook): the range of float32 with 8 bits of precision.
func BF16CompressHook() Hook[float32] {
	return compressHook(comm.NewBFloat16, comm.BFloat16.Float32)
}

// compressHook divides a bucket by the world size, narrows it to H,
// all-reduces the narrow copy with Sum and widens the result back.
func compressHook[H comm.Float16 | comm.BFloat16](narrow func(float32) H, widen func(H) float32) Hook[float32] {
	bufs := map[int][]H{} // per bucket index; hook calls come one at a time
	return func(ctx context.Context, c *comm.Comm, b *Bucket[float32]) *comm.Work {
		if b == nil {
			return nilBucket()
		}
		if c.Size() < 1 {
			// A nil or non-member communicator: let the collective say so.
			return comm.StartAllReduce(ctx, c, b.Data, b.Data, comm.Sum)
		}
		h := bufs[b.Index]
		if len(h) != len(b.Data) {
			h = make([]H, len(b.Data))
			bufs[b.Index] = h
		}
		n := float32(c.Size())
		for i, x := range b.Data {
			h[i] = narrow(x / n)
		}
		// The collective is started here, in bucket order; only the
		// widening waits for it on another goroutine.
		w := comm.StartAllReduce(ctx, c, h, h, comm.Sum)
		return comm.StartFunc(func() error {
			if err := w.Wait(); err != nil {
				return err
			}
			for i, x := range h {
				b.Data[i] = widen(x)
			}
			return nil
		})
	}
}

// OnebitHook reduces each bucket with onebit.StartAllReduce, DeepSpeed's
// error-compensated 1-bit average (about 1/32 of the bytes of a float32
// all-reduce), keeping one onebit.State per bucket across steps: the
// error feedback of bucket k carries over to bucket k's next reduction.
// The states start afresh when the buckets are rebuilt (Layout.Epoch).
//
// onebit issues its collectives from the Work's goroutine, so each
// bucket's reduction starts when the previous bucket's is done: the
// buckets are reduced one after another, still overlapping backward.
// Use one hook per Reducer.
func OnebitHook() Hook[float32] {
	var (
		states = map[int]*onebit.State{} // per bucket index
		epoch  int
		prev   *comm.Work // the previous bucket's reduction
	)
	return func(ctx context.Context, c *comm.Comm, b *Bucket[float32]) *comm.Work {
		if b == nil {
			return nilBucket()
		}
		if b.Epoch != epoch {
			clear(states)
			epoch = b.Epoch
		}
		st := states[b.Index]
		if st == nil || len(st.WorkerError) != onebit.PaddedLen(len(b.Data), c.Size()) {
			st = onebit.NewState(len(b.Data), c.Size())
			states[b.Index] = st
		}
		after := prev
		if b.Index == 0 {
			after = nil // the previous step's last bucket is done: Wait saw to it
		}
		w := comm.StartFunc(func() error {
			if after != nil {
				// A failure there has aborted the world or will fail this
				// bucket's collectives too; it is reported by its own Work.
				<-after.Done()
			}
			return onebit.AllReduce(ctx, c, b.Data, st)
		})
		prev = w
		return w
	}
}

// HookFunc adapts a function that reduces a bucket in place, blocking, to
// a Hook whose reductions run one after another on their own goroutine
// each, after the previous bucket's: the way to use blocking collectives
// (or several collectives per bucket) in a hook without breaking the
// order every rank must issue them in. An error from f aborts c's world
// with that error: f may have failed before collectives the other ranks
// are waiting in.
func HookFunc[T comm.Numeric](f func(ctx context.Context, c *comm.Comm, b *Bucket[T]) error) Hook[T] {
	var (
		mu   sync.Mutex // protects prev across Reducers sharing the hook
		prev *comm.Work
	)
	return func(ctx context.Context, c *comm.Comm, b *Bucket[T]) *comm.Work {
		if b == nil {
			return nilBucket()
		}
		if f == nil {
			return comm.StartFunc(func() error {
				return fmt.Errorf("%w: ddp: HookFunc(nil): pass the function that reduces a bucket", comm.ErrInvalid)
			})
		}
		mu.Lock()
		defer mu.Unlock()
		after := prev
		w := comm.StartFunc(func() error {
			if after != nil {
				<-after.Done()
			}
			err := f(ctx, c, b)
			if err != nil {
				c.Abort(err)
			}
			return err
		})
		prev = w
		return w
	}
}
