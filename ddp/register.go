package ddp

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/object"
)

// registration is what every rank must agree on before buckets are
// built: exported so that it travels with package object when the ranks
// disagree and the error must say how.
type registration struct {
	DType               string
	BucketCapBytes      int
	FirstBucketCapBytes int
	FindUnused          bool
	KeepOrder           bool
	BucketBuffers       int
	Shapes              [][]int
}

// dtypeName names T as gocomm reduces it: Float16 and BFloat16 by name,
// any other type by its underlying kind (a type defined on float32 is a
// float32), so that ranks agree exactly when their reductions would.
func dtypeName[T comm.Numeric]() string {
	var z T
	switch any(z).(type) {
	case comm.Float16:
		return "float16"
	case comm.BFloat16:
		return "bfloat16"
	}
	return reflect.TypeFor[T]().Kind().String()
}

// maxBytes bounds the gradients' memory: the user address space of
// 64-bit Linux. More could never be allocated, and asking for it would
// crash the process instead of returning an error.
const maxBytes int64 = 1 << 47

// numelOf is the element count of shape, or an error saying what is
// wrong with it: a negative dimension, or more elements than memory can
// hold.
func numelOf(shape []int, elemSize int) (int, error) {
	limit := maxBytes / int64(elemSize)
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("dimension %d is negative", d)
		}
		if d != 0 && n > limit/int64(d) {
			return 0, fmt.Errorf("more elements than memory can hold")
		}
		n *= int64(d)
	}
	if n > int64(math.MaxInt) {
		return 0, fmt.Errorf("more elements than an int can count")
	}
	return int(n), nil
}

// validate checks one rank's registration on its own, so that every
// rank can name another's mistake after the exchange.
func (g *registration) validate(elemSize int) error {
	switch {
	case len(g.Shapes) == 0:
		return fmt.Errorf("no gradients registered: pass one shape per gradient")
	case g.BucketCapBytes < 0:
		return fmt.Errorf("Options.BucketCapBytes is %d: pass 0 for the default or a positive size", g.BucketCapBytes)
	case g.FirstBucketCapBytes < 0:
		return fmt.Errorf("Options.FirstBucketCapBytes is %d: pass 0 for the default or a positive size", g.FirstBucketCapBytes)
	case g.BucketBuffers < 0:
		return fmt.Errorf("Options.BucketBuffers is %d: pass 0 (every bucket its own memory) or a positive count", g.BucketBuffers)
	}
	limit := maxBytes / int64(elemSize)
	total := int64(0)
	for i, s := range g.Shapes {
		n, err := numelOf(s, elemSize)
		if err != nil {
			return fmt.Errorf("gradient %d %v: %v", i, s, err)
		}
		if total += int64(n); total > limit {
			return fmt.Errorf("gradient %d %v: the gradients up to it have more elements than memory can hold", i, s)
		}
	}
	return nil
}

// digest is a fixed-size summary of the registration, equal on two ranks
// exactly when their registrations are.
func (g *registration) digest() [sha256.Size]byte {
	h := sha256.New()
	var b []byte
	put := func(v int) { b = binary.AppendVarint(b, int64(v)) }
	b = append(b, g.DType...)
	b = append(b, 0)
	put(g.BucketCapBytes)
	put(g.FirstBucketCapBytes)
	b = append(b, boolByte(g.FindUnused), boolByte(g.KeepOrder))
	put(g.BucketBuffers)
	put(len(g.Shapes))
	for _, s := range g.Shapes {
		put(len(s))
		for _, d := range s {
			put(d)
		}
		if len(b) > 4096 {
			h.Write(b)
			b = b[:0]
		}
	}
	h.Write(b)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// agree is New's collective check: the ranks all-gather digests of their
// registrations and, only when they differ, the registrations themselves,
// so that every rank returns the same error naming the first difference.
func agree(ctx context.Context, c *comm.Comm, reg *registration, elemSize int) error {
	if c.Size() == 1 {
		return nil
	}
	sum := reg.digest()
	all := make([]uint8, len(sum)*c.Size())
	if err := comm.AllGather(ctx, c, sum[:], all); err != nil {
		return fmt.Errorf("comm: ddp: New: comparing the registered gradients across ranks: %w", err)
	}
	same := true
	for r := range c.Size() {
		same = same && string(all[r*len(sum):(r+1)*len(sum)]) == string(sum[:])
	}
	if same {
		return nil
	}
	regs, err := object.AllGather(ctx, c, *reg)
	if err != nil {
		return fmt.Errorf("%w (the exchange that would say how failed: %w)", ErrMismatch, err)
	}
	return fmt.Errorf("%w: %s", ErrMismatch, describeMismatch(regs, elemSize))
}

// describeMismatch says how the registrations of the ranks differ: the
// ranks whose registration is invalid, then the first field or gradient
// they disagree on, with its value on each rank.
func describeMismatch(regs []registration, elemSize int) string {
	var parts []string
	for r := range regs {
		if err := regs[r].validate(elemSize); err != nil {
			parts = append(parts, fmt.Sprintf("rank %d: %v", r, err))
		}
	}
	field := func(name string, value func(g *registration) string) bool {
		vals := make([]string, len(regs))
		for r := range regs {
			vals[r] = value(&regs[r])
		}
		if d := differing(vals); d != "" {
			parts = append(parts, name+": "+d)
			return true
		}
		return false
	}
	field("element type", func(g *registration) string { return g.DType })
	field("Options.BucketCapBytes", func(g *registration) string { return strconv.Itoa(g.BucketCapBytes) })
	field("Options.FirstBucketCapBytes", func(g *registration) string { return strconv.Itoa(g.FirstBucketCapBytes) })
	field("Options.FindUnused", func(g *registration) string { return strconv.FormatBool(g.FindUnused) })
	field("Options.KeepOrder", func(g *registration) string { return strconv.FormatBool(g.KeepOrder) })
	field("Options.BucketBuffers", func(g *registration) string { return strconv.Itoa(g.BucketBuffers) })
	counted := field("gradient count", func(g *registration) string { return strconv.Itoa(len(g.Shapes)) })
	most := 0
	for r := range regs {
		most = max(most, len(regs[r].Shapes))
	}
	for i := range most {
		if field(fmt.Sprintf("gradient %d", i), func(g *registration) string {
			if i >= len(g.Shapes) {
				return "missing"
			}
			return fmt.Sprintf("shape %v", g.Shapes[i])
		}) {
			break
		}
	}
	if len(parts) == 0 || (counted && len(parts) == 1) {
		parts = append(parts, "the registrations differ")
	}
	return strings.Join(parts, "; ")
}

// differing describes vals (one per rank) when they are not all equal:
// each distinct value with the ranks that hold it, the value most ranks
// hold first. It is "" when they are all equal.
func differing(vals []string) string {
	var distinct []string
	ranks := map[string][]int{}
	for r, v := range vals {
		if _, ok := ranks[v]; !ok {
			distinct = append(distinct, v)
		}
		ranks[v] = append(ranks[v], r)
	}
	if len(distinct) < 2 {
		return ""
	}
	slices.SortStableFunc(distinct, func(a, b string) int { return len(ranks[b]) - len(ranks[a]) })
	out := make([]string, len(distinct))
	for j, v := range distinct {
		out[j] = v + " on " + rankList(ranks[v])
	}
	return strings.Join(out, ", ")
}

// rankList writes ascending ranks compactly: "rank 2", "ranks 0-3, 5".
func rankList(rs []int) string {
	var b strings.Builder
	if len(rs) == 1 {
		b.WriteString("rank ")
	} else {
		b.WriteString("ranks ")
	}
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(rs[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(rs[j]))
		}
		i = j + 1
	}
	return b.String()
}
