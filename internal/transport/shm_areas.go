package transport

import (
	"sync"
	"time"
)

// SegmentAreas asks a host's shared-memory segment to set aside, for each
// of its ranks, a block of Board bytes and a page-aligned block of Stage
// bytes for shared-memory collectives (package shmcoll lays them out and
// runs them), when the host has at most MaxRanks ranks. They are used
// only when every rank of the world is on the host (Hybrid.Areas). The
// zero value sets aside none. Every rank of a host must ask for the same.
type SegmentAreas struct {
	MaxRanks     int
	Board, Stage int
}

// Areas is this rank's access to the collective areas of a segment that
// every rank of the world maps, and to the endpoint state that waits on
// them must obey: the mapping's lock, failure, peer liveness and sleep.
// It moves no data and runs no collective. Its methods are safe for
// concurrent use.
type Areas struct {
	e            *shmEndpoint
	mu           *sync.RWMutex // e's mapMu
	mb           *mailbox      // e's
	n, me        int
	board, stage []byte
	// closing is called by the endpoint's close with the mapping locked
	// for writing, after the segment is marked unmapped (OnClose).
	closing func()
}

// CacheLine is the alignment of the board blocks and of the words in
// them that ranks poll; SegmentPage that of the stage blocks.
const (
	CacheLine   = cacheLine
	SegmentPage = shmPage
)

// Areas returns the collective areas of the endpoint's segment, or nil
// when not every rank of the world shares this host's segment or the
// segment has none (SHMOptions.Areas).
func (e *Hybrid) Areas() *Areas {
	if e.shm == nil {
		return nil
	}
	return e.shm.areas
}

// Size is the number of ranks of the world (every one of them on the
// segment: world rank == local index); Rank is this rank's.
func (a *Areas) Size() int { return a.n }
func (a *Areas) Rank() int { return a.me }

// Board returns every rank's board block, Size blocks of
// SegmentAreas.Board bytes in rank order; Stage likewise the stage
// blocks. Touch them only between Hold and Release.
func (a *Areas) Board() []byte { return a.board }
func (a *Areas) Stage() []byte { return a.stage }

// Hold takes the mapping for one operation on the areas: it returns nil
// with the mapping's lock held for reading (the caller releases it with
// Release), or why the operation cannot run, with nothing held: the
// endpoint is closed, or aborted (by a peer, say: nothing is posted, as
// a send would fail now).
func (a *Areas) Hold() error {
	a.mu.RLock()
	switch {
	case a.e.unmapped:
		a.mu.RUnlock()
		return ErrClosed
	case a.mb.hasFailed.Load():
		a.mu.RUnlock()
		return a.mb.failed()
	}
	return nil
}

// Release ends what Hold or RLock began.
func (a *Areas) Release() { a.mu.RUnlock() }

// RLock holds the mapping's lock for reading, without Hold's checks;
// Lock and Unlock hold it for writing, as mapping more memory beside the
// segment does (Unmapped then says whether the endpoint has closed).
func (a *Areas) RLock()  { a.mu.RLock() }
func (a *Areas) Lock()   { a.mu.Lock() }
func (a *Areas) Unlock() { a.mu.Unlock() }

// Unmapped reports whether the endpoint has closed; the caller holds the
// mapping's lock.
func (a *Areas) Unmapped() bool { return a.e.unmapped }

// OnClose has the endpoint's close call f once, with the mapping's lock
// held for writing, after the segment is unmapped: what was mapped beside
// it is released there. Set it before the first operation.
func (a *Areas) OnClose(f func()) { a.closing = f }

// Failed reports whether the endpoint has failed (an abort, a lost
// peer); Err is then why.
func (a *Areas) Failed() bool { return a.mb.hasFailed.Load() }
func (a *Areas) Err() error   { return a.mb.failed() }

// PeerErr is why rank r can no longer be waited for (it closed or was
// lost, which fails the endpoint as a receive from r would), or nil.
func (a *Areas) PeerErr(r int) error { return a.mb.sendErr(r) }

// Backoff returns the pacing of one wait on the areas: the rings'
// SpinWait and YieldWait, or, for stage (the waits between the chunks of
// a large collective), the stage's spin.
func (a *Areas) Backoff(stage bool) Backoff {
	o := &a.e.opts
	bo := Backoff{spin: o.SpinWait, yield: o.YieldWait}
	if stage {
		bo.spin = o.stageSpin
	}
	return bo
}

// Sleep sleeps on word while it holds val, as the rings' waits do: until
// a wake (Wake, after the waker changed the word), d passes, done is
// closed, the endpoint fails, or rank peer is lost.
func (a *Areas) Sleep(word *uint32, val uint32, d time.Duration, done <-chan struct{}, peer int) {
	a.e.sleep(word, val, d, done, a.mb.failedCh, a.mb.lostChan(peer))
}

// Path is the segment's file name (removed once mapped): files mapped
// beside the segment are named after it.
func (a *Areas) Path() string { return a.e.path }

// Wake wakes every sleeper on word (Areas.Sleep).
func Wake(word *uint32) { futexWake(word) }

// Prefault faults in every page of mem, writable, without changing a byte.
func Prefault(mem []byte) { prefault(mem) }

// CreateSegment creates a zeroed file of size bytes named name in dir
// (a usable directory if dir is "") and maps it shared; the caller
// removes the file at path. OpenSegment maps an existing one;
// UnmapSegment unmaps either.
func CreateSegment(dir, name string, size int) (mem []byte, path string, err error) {
	return createSegment(dir, name, size)
}
func OpenSegment(path string, size int) ([]byte, error) { return openSegment(path, size) }
func UnmapSegment(mem []byte) error                     { return unmapSegment(mem) }

// newAreas is the collective areas of a segment mapped at mem whose n
// ranks make the whole world.
func newAreas(e *shmEndpoint, mem []byte, l shmLayout, me int) *Areas {
	return &Areas{e: e, mu: &e.mapMu, mb: e.mb, n: l.n, me: me,
		board: mem[l.board():l.stage()][:l.n*l.areas.Board],
		stage: mem[l.stage() : l.stage()+l.n*l.areas.Stage]}
}
