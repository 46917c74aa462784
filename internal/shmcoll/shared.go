package shmcoll

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"unsafe"

	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/internal/kernel"
	"github.com/gocomm/comm/internal/transport"
)

// Shared allocations: memory that every rank of a board's world maps, so
// that an all-reduce of buffers in it reads every rank's input where it
// is and writes every rank's result there, with no copy through the
// segment (what MPI_Win_allocate_shared and torch's symmetric memory give
// their users). Each rank creates a file of the allocation's size, named
// after the segment's, every rank maps every file, and once all have the
// creator removes its own: nothing is left on disk if processes die.
//
// The stage moves about 5 bytes through memory per input byte at 64 MiB
// (its input read, the segment's chunk written and read, the stripe
// written and read, the result written); reading the inputs in place, a
// rank reads its stripe of every input and writes its stripe of every
// result: about 2, which makes large all-reduces several times faster
// than the stage's (see docs/performance.md).

// sharedMap is one shared allocation as this rank sees it.
type sharedMap struct {
	id   uint64
	size int
	mem  [][]byte // every rank's file mapped here, by rank; mem[me] is this rank's
}

// sharedPiece is the part of a stripe reduced at a time, so that the
// result is still in the first-level cache when it is copied to the
// peers' buffers.
const sharedPiece = 16 << 10

// sharedDesc is what a rank posts before an all-reduce on shared
// buffers: whether both of its buffers are shared, and where (the
// allocations' ids and the buffers' offsets in them).
type sharedDesc struct {
	ok                               bool
	sendID, sendOff, recvID, recvOff uint64
}

const sharedDescBytes = 40

func (d sharedDesc) put(p []byte) {
	le := binary.LittleEndian
	var ok uint64
	if d.ok {
		ok = 1
	}
	le.PutUint64(p[0:], ok)
	le.PutUint64(p[8:], d.sendID)
	le.PutUint64(p[16:], d.sendOff)
	le.PutUint64(p[24:], d.recvID)
	le.PutUint64(p[32:], d.recvOff)
}

func getSharedDesc(p []byte) (sharedDesc, error) {
	if len(p) != sharedDescBytes {
		return sharedDesc{}, fmt.Errorf("a %d-byte shared-buffer descriptor, want %d", len(p), sharedDescBytes)
	}
	le := binary.LittleEndian
	ok := le.Uint64(p[0:])
	if ok > 1 {
		return sharedDesc{}, fmt.Errorf("a shared-buffer descriptor flagged %d", ok)
	}
	return sharedDesc{ok: ok == 1, sendID: le.Uint64(p[8:]), sendOff: le.Uint64(p[16:]),
		recvID: le.Uint64(p[24:]), recvOff: le.Uint64(p[32:])}, nil
}

// sharedPath names rank r's file of allocation id.
func (b *Board) sharedPath(id uint64, r int) (dir, name string) {
	return filepath.Dir(b.seg.Path()), fmt.Sprintf("%s.a%d.%d", filepath.Base(b.seg.Path()), id, r)
}

// MapShared makes allocation id (a number every rank gives the same
// allocation, used once) of size bytes, zeroed, and returns this rank's
// part. Every rank of the world calls it together; agree is a
// collective of the world that returns nil when every rank passed true,
// else an error: MapShared calls it twice, after creating this rank's
// file and after mapping the peers'. On error nothing is left mapped or
// on disk.
func (b *Board) MapShared(id uint64, size int, agree func(ok bool) error) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("comm: transport: a shared allocation of %d bytes", size)
	}
	m := &sharedMap{id: id, size: size, mem: make([][]byte, b.n)}
	unmap := func() {
		for r, mem := range m.mem {
			if mem != nil {
				transport.UnmapSegment(mem)
				m.mem[r] = nil
			}
		}
	}
	dir, name := b.sharedPath(id, b.me)
	mine, path, err := transport.CreateSegment(dir, name, size)
	if err == nil {
		m.mem[b.me] = mine
		defer os.Remove(path) // once every rank has mapped it, or on failure
	} else {
		err = fmt.Errorf("rank %d could not create %d bytes of shared memory in %s: %w", b.me, size, dir, err)
	}
	if aerr := agree(err == nil); err != nil || aerr != nil {
		unmap()
		return nil, errors.Join(err, aerr)
	}
	for r := range b.n {
		if r == b.me {
			continue
		}
		dir, name := b.sharedPath(id, r)
		mem, oerr := transport.OpenSegment(filepath.Join(dir, name), size)
		if oerr != nil {
			err = fmt.Errorf("rank %d could not map rank %d's shared memory: %w", b.me, r, oerr)
			break
		}
		m.mem[r] = mem
	}
	if aerr := agree(err == nil); err != nil || aerr != nil {
		unmap()
		return nil, errors.Join(err, aerr)
	}
	// Each process has its own page tables: fault every page in now, not
	// in the first all-reduce (a virtual machine that supplies memory
	// lazily makes each first touch of a page slow).
	for _, mem := range m.mem {
		transport.Prefault(mem)
	}
	b.seg.Lock()
	defer b.seg.Unlock()
	if b.seg.Unmapped() {
		unmap()
		return nil, core.ErrClosed
	}
	b.shared = append(b.shared, m)
	return mine, nil
}

// UnmapShared releases the shared allocation whose part on this rank is
// mem (as MapShared returned it): this rank's mapping of every rank's
// file. It needs no peer: a peer still reading this rank's file keeps its
// own mapping of it. Any other mem is left alone. mem must not be used
// after.
func (b *Board) UnmapShared(mem []byte) error {
	b.seg.Lock()
	defer b.seg.Unlock()
	for i, m := range b.shared {
		if len(mem) == m.size && unsafe.SliceData(mem) == unsafe.SliceData(m.mem[b.me]) {
			var err error
			for _, p := range m.mem {
				if p != nil {
					err = errors.Join(err, transport.UnmapSegment(p))
				}
			}
			b.shared = slices.Delete(b.shared, i, i+1)
			return err
		}
	}
	return nil
}

// IsShared reports whether mem lies within one of this rank's shared
// allocations.
func (b *Board) IsShared(mem []byte) bool {
	b.seg.RLock()
	defer b.seg.Release()
	_, _, ok := b.sharedAt(mem)
	return ok
}

// unmapPeers releases the peers' files of every shared allocation when
// the endpoint closes; this rank's own parts stay mapped, as their owner
// may still read them, until UnmapShared. The caller holds mapMu.
func (b *Board) unmapPeers() {
	for _, m := range b.shared {
		for r, p := range m.mem {
			if r != b.me && p != nil {
				transport.UnmapSegment(p)
				m.mem[r] = nil
			}
		}
	}
}

// sharedAt finds p in this rank's shared allocations: the allocation and
// p's offset in it. The caller holds mapMu.
func (b *Board) sharedAt(p []byte) (m *sharedMap, off uint64, ok bool) {
	if len(p) == 0 {
		return nil, 0, false
	}
	at := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	for _, m := range b.shared {
		mine := m.mem[b.me]
		base := uintptr(unsafe.Pointer(unsafe.SliceData(mine)))
		if at >= base && at-base <= uintptr(m.size-len(p)) && len(p) <= m.size {
			return m, uint64(at - base), true
		}
	}
	return nil, 0, false
}

// sharedByID returns allocation id; the caller holds mapMu.
func (b *Board) sharedByID(id uint64) *sharedMap {
	for _, m := range b.shared {
		if m.id == id {
			return m
		}
	}
	return nil
}

// AllReduceShared runs the all-reduce seq (of signature sig) of send into
// recv in place in the shared allocations, when every rank's send and
// recv lie in them: ran is false, with nothing done but one board
// exchange, when some rank's do not (the caller then runs it otherwise,
// on the stage say). Every rank must call it for the same collectives, in
// the same order as the board's others. elem and fold are as for
// AllReduce.
//
// The ranks first post where their buffers are (an exchange that also
// says every input is ready); then each folds its stripe of every rank's
// send, in rank order, into its own recv and copies it into the peers'
// recv with stores that bypass its cache; a second exchange says every
// result is written.
func (b *Board) AllReduceShared(ctx context.Context, seq uint64, sig core.Signature, send, recv []byte, elem int, fold Fold) (ran bool, err error) {
	if len(send) != len(recv) {
		return true, fmt.Errorf("comm: transport: shared all-reduce of %d bytes into %d", len(send), len(recv))
	}
	if elem <= 0 || cacheLine%elem != 0 || len(send)%elem != 0 {
		return true, fmt.Errorf("comm: transport: shared all-reduce of %d bytes in elements of %d", len(send), elem)
	}
	var desc sharedDesc
	b.seg.RLock()
	sm, so, sok := b.sharedAt(send)
	rm, ro, rok := b.sharedAt(recv)
	b.seg.Release()
	if sok && rok {
		desc = sharedDesc{ok: true, sendID: sm.id, sendOff: so, recvID: rm.id, recvOff: ro}
	}
	var post [sharedDescBytes]byte
	desc.put(post[:])
	descs := b.descs[:0]
	var bad error
	err = b.Exchange(ctx, seq, sig, post[:], sharedDescBytes, -1, func(r int, p []byte) {
		d, derr := getSharedDesc(p)
		if derr != nil && bad == nil {
			bad = &core.PeerError{Peer: r, Err: fmt.Errorf("comm: transport: rank %d posted %w", r, derr)}
		}
		descs = append(descs, d)
	})
	b.descs = descs
	if err == nil {
		err = bad
	}
	if err != nil {
		return true, err
	}
	for _, d := range descs {
		if !d.ok {
			return false, nil
		}
	}
	if err := b.foldShared(descs, send, recv, fold); err != nil {
		return true, err
	}
	return true, b.Exchange(ctx, seq, sig, nil, 0, -1, func(int, []byte) {})
}

// foldShared is AllReduceShared's middle: this rank's stripe of every
// rank's result.
func (b *Board) foldShared(descs []sharedDesc, send, recv []byte, fold Fold) error {
	if err := b.seg.Hold(); err != nil {
		return err
	}
	defer b.seg.Release()
	n := len(send)
	srcs, dsts := b.st.srcs, b.sharedDsts[:0]
	for r, d := range descs {
		sm, rm := b.sharedByID(d.sendID), b.sharedByID(d.recvID)
		if sm == nil || rm == nil || sm.mem[r] == nil || rm.mem[r] == nil || n > sm.size || n > rm.size ||
			d.sendOff > uint64(sm.size-n) || d.recvOff > uint64(rm.size-n) {
			return &core.PeerError{Peer: r, Err: fmt.Errorf("comm: transport: rank %d posted %d bytes at offsets %d and %d of shared allocations %d and %d, which this rank does not have",
				r, n, d.sendOff, d.recvOff, d.sendID, d.recvID)}
		}
		srcs[r] = sm.mem[r][d.sendOff : d.sendOff+uint64(n)]
		dsts = append(dsts, rm.mem[r][d.recvOff:d.recvOff+uint64(n)])
	}
	b.sharedDsts = dsts
	lo, hi := stripe(n, b.n, b.me)
	pieces, mine := b.sharedPieces, dsts[b.me]
	// With one peer and a result too large to stay in the cache, the fold
	// stores the stripe into both results in one pass around the cache
	// (as the stage does from the same size, for the same reason: see
	// StageAroundMin).
	var peer []byte
	if b.n == 2 && n >= StageAroundMin {
		peer = dsts[1-b.me]
	}
	for a := lo; a < hi; a += sharedPiece {
		z := min(a+sharedPiece, hi)
		for r := range pieces {
			pieces[r] = srcs[r][a:z]
		}
		// In place, this rank's input is where its result goes: fold from
		// a copy (still in cache) instead.
		if &send[a] == &recv[a] {
			pieces[b.me] = b.st.mine[:copy(b.st.mine, send[a:z])]
		}
		if peer != nil {
			if err := fold(mine[a:z], peer[a:z], pieces); err != nil {
				return err
			}
			continue
		}
		if err := fold(mine[a:z], nil, pieces); err != nil {
			return err
		}
		for r, dst := range dsts {
			if r != b.me {
				kernel.CopyShared(dst[a:z], mine[a:z])
			}
		}
	}
	return nil
}
