package transport

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/gocomm/comm/internal/kernel"
)

var errNoSHMHere = fmt.Errorf("the shared-memory transport is not available on %s", runtime.GOOS)

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// segmentName names a new segment file after the job's prefix and the
// host, plus a random part so that no two segments ever collide.
func segmentName(prefix, hostID string) string {
	var nonce [8]byte
	rand.Read(nonce[:])
	return "gocomm-" + hashHex(prefix + "\x00" + hostID)[:12] + "-" + hex.EncodeToString(nonce[:])
}

// newSHMEndpoint sets up the shared-memory segment of the ranks local
// (sorted, this rank among them) together with them, through the store,
// and returns the endpoint over it with its drainer running: the lowest
// creates the file and publishes its path, every other maps it and
// reports, the creator removes the file once all have mapped it (so that
// nothing is left behind if processes die later) and announces the
// verdict. A non-nil fallback (with a nil endpoint and err) means the
// host's ranks agreed to use TCP instead; err means the set-up itself
// failed (a store error, ctx). mb is the mailbox the endpoint delivers
// into (the TCP endpoint's), link how it reports a peer that broke the
// ring protocol, vanished or had a message interrupted (see shmEndpoint).
func newSHMEndpoint(ctx context.Context, store AddrStore, o *TCPOptions, hostID string, local []int, so SHMOptions, hook func(int) error,
	mb *mailbox, link peerLink) (_ *shmEndpoint, fallback, err error) {
	e := &shmEndpoint{
		rank: o.Rank, size: o.Size, mb: mb, lost: link.peerLost, vanished: link.peerVanished,
		out: make([]*ringOut, o.Size), in: make([]*ringIn, o.Size),
		handoff: make(chan struct{}, 1), drainStop: make(chan struct{}),
	}
	fallback, err = e.setup(ctx, store, o, hostID, local, so, hook)
	if fallback != nil || err != nil {
		return nil, fallback, err
	}
	// A peer whose connection ended is lost only once its ring is
	// drained: have the drainer and any poller look.
	mb.mu.Lock()
	mb.wakeRings = func() {
		e.me.wakeDrainer()
		e.me.wakePoller()
	}
	mb.mu.Unlock()
	e.wg.Add(1)
	go e.drainLoop()
	return e, nil, nil
}

// setup is newSHMEndpoint's agreement with the other ranks of the host;
// it maps the segment and attaches e to it, or says why not.
func (e *shmEndpoint) setup(ctx context.Context, store AddrStore, o *TCPOptions, hostID string, local []int, so SHMOptions, hook func(int) error) (fallback, err error) {
	me := slices.Index(local, e.rank)
	n := len(local)
	if n > maxLocalRanks {
		return fmt.Errorf("%d ranks on one host exceed the segment's limit of %d", n, maxLocalRanks), nil
	}
	base := o.Prefix + "/shm/" + hashHex(hostID)
	wrap := func(err error) error {
		return fmt.Errorf("comm: transport: rank %d: setting up shared memory with ranks %v: %w", e.rank, local, err)
	}
	if me == 0 {
		so, err := so.withDefaults(n)
		if err != nil {
			store.Set(ctx, base+"/segment", []byte("!"+err.Error()))
			return nil, err
		}
		l := shmLayout{n: n, ringBytes: so.RingBytes, areas: so.Areas}
		mem, path, cerr := createSegment(so.Dir, segmentName(o.Prefix, hostID), l.size())
		if cerr != nil {
			cerr = fmt.Errorf("rank %d could not create a %d-byte segment: %w", e.rank, l.size(), cerr)
			if err := store.Set(ctx, base+"/segment", []byte("!"+cerr.Error())); err != nil {
				return nil, wrap(err)
			}
			return cerr, nil
		}
		defer os.Remove(path) // idempotent; the normal path removes it earlier
		e.path = path
		writeSegmentHeader(mem, l, local)
		e.advertise(mem, l, me)
		if err := store.Set(ctx, base+"/segment", []byte(strconv.Itoa(so.RingBytes)+" "+path)); err != nil {
			unmapSegment(mem)
			return nil, wrap(err)
		}
		var problems []string
		for _, r := range local[1:] {
			v, err := store.Get(ctx, base+"/mapped/"+strconv.Itoa(r))
			if err != nil {
				unmapSegment(mem)
				return nil, wrap(fmt.Errorf("waiting for rank %d to map %s: %w", r, path, err))
			}
			if s := string(v); s != "ok" {
				problems = append(problems, fmt.Sprintf("rank %d: %s", r, s))
			}
		}
		os.Remove(path)
		verdict := "ok"
		if len(problems) > 0 {
			verdict = strings.Join(problems, "; ")
		}
		if err := store.Set(ctx, base+"/ready", []byte(verdict)); err != nil {
			unmapSegment(mem)
			return nil, wrap(err)
		}
		if verdict != "ok" {
			unmapSegment(mem)
			return errors.New("shared memory unusable: " + verdict), nil
		}
		e.attach(mem, l, local, me, so)
		return nil, nil
	}

	v, err := store.Get(ctx, base+"/segment")
	if err != nil {
		return nil, wrap(fmt.Errorf("waiting for rank %d's segment: %w", local[0], err))
	}
	if s, ok := strings.CutPrefix(string(v), "!"); ok {
		return errors.New(s), nil
	}
	sizeStr, path, ok := strings.Cut(string(v), " ")
	ringBytes, perr := strconv.Atoi(sizeStr)
	if !ok || perr != nil {
		return nil, wrap(fmt.Errorf("rank %d published a malformed segment %q", local[0], v))
	}
	e.path = path
	so.RingBytes = ringBytes
	so.ChunkBytes = min(so.ChunkBytes, ringBytes/4)
	so, oerr := so.withDefaults(n)
	l := shmLayout{n: n, ringBytes: so.RingBytes, areas: so.Areas}
	var mem []byte
	if oerr == nil && hook != nil {
		oerr = hook(e.rank)
	}
	if oerr == nil {
		mem, oerr = openSegment(path, l.size())
		if oerr == nil {
			if oerr = checkSegmentHeader(mem, l, local); oerr != nil {
				unmapSegment(mem)
			} else {
				e.advertise(mem, l, me)
			}
		}
	}
	report := "ok"
	if oerr != nil {
		report = oerr.Error()
	}
	if err := store.Set(ctx, base+"/mapped/"+strconv.Itoa(e.rank), []byte(report)); err != nil {
		if oerr == nil {
			unmapSegment(mem)
		}
		return nil, wrap(err)
	}
	verdict, err := store.Get(ctx, base+"/ready")
	if err == nil && string(verdict) != "ok" {
		err = errors.New("shared memory unusable: " + string(verdict))
		if oerr == nil {
			unmapSegment(mem)
		}
		return err, nil
	}
	if err != nil {
		if oerr == nil {
			unmapSegment(mem)
		}
		return nil, wrap(err)
	}
	e.attach(mem, l, local, me, so)
	return nil, nil
}

// advertise writes this rank's process id and the address of its probe
// word into its consumer block, for peers to test whether they can copy
// straight out of this process's memory (see recSingle). Every rank does
// it before it reports the segment mapped, so all have when attach runs.
func (e *shmEndpoint) advertise(mem []byte, l shmLayout, me int) {
	pid := os.Getpid()
	e.probe = new(uint64)
	*e.probe = probeValue(pid)
	c := consumerAt(mem, l.consBlock(me))
	atomic.StoreUint64(c.probe, uint64(uintptr(unsafe.Pointer(e.probe))))
	atomic.StoreUint64(c.pid, uint64(pid))
}

// aloneInProcess reports whether no other local rank of the segment
// lives in this process (as the ranks of a test's world do), from the
// process ids every rank advertised before attaching.
func aloneInProcess(mem []byte, l shmLayout, n, me int) bool {
	pid := uint64(os.Getpid())
	for k := range n {
		if k != me && atomic.LoadUint64(consumerAt(mem, l.consBlock(k)).pid) == pid {
			return false
		}
	}
	return true
}

// probeValue is what a rank's probe word holds.
func probeValue(pid int) uint64 { return 0x676f636f6d6d5052 ^ uint64(pid) }

// canReadPeer reports whether this process can copy out of the memory of
// the rank owning consumer block c: it reads the rank's probe word there.
// Ranks in other PID namespaces, a kernel that forbids tracing the peer,
// or a seccomp filter make it fail.
func canReadPeer(c consumerWords) (pid int, ok bool) {
	pid = int(atomic.LoadUint64(c.pid))
	addr := atomic.LoadUint64(c.probe)
	if pid <= 0 || addr == 0 {
		return pid, false
	}
	var got [8]byte
	if readPeer(pid, addr, got[:]) != nil {
		return pid, false
	}
	return pid, binary.NativeEndian.Uint64(got[:]) == probeValue(pid)
}

// attach builds the endpoint's rings over a mapped segment. It tells each
// peer whether this rank can copy out of its memory (the ring's single
// word), unless single copy is off here.
func (e *shmEndpoint) attach(mem []byte, l shmLayout, local []int, me int, so SHMOptions) {
	e.seg, e.opts, e.chunk = mem, so, so.ChunkBytes
	kernel.SetCacheBypass(so.Stores == "bypass")
	e.alone = aloneInProcess(mem, l, len(local), me)
	e.mapRefs.Store(1) // close's
	e.singleMin = max(so.SingleCopyBytes, 0)
	e.me = consumerAt(mem, l.consBlock(me))
	for k, p := range local {
		if k == me {
			continue
		}
		out := &ringOut{
			peer: p,
			d:    mem[l.ring(me, k) : l.ring(me, k)+l.ringBytes],
			ctl:  ringAt(mem, l.ringCtl(me, k)),
			cons: consumerAt(mem, l.consBlock(k)),
			lock: newSendLock(),
		}
		in := &ringIn{
			peer: p,
			d:    mem[l.ring(k, me) : l.ring(k, me)+l.ringBytes],
			ctl:  ringAt(mem, l.ringCtl(k, me)),
		}
		verdict := uint32(singleNo)
		if so.SingleCopyBytes > 0 {
			if in.pid, in.single = canReadPeer(out.cons); in.single {
				verdict = singleYes
			}
		}
		atomic.StoreUint32(in.ctl.single, verdict)
		prefault(out.d)
		prefault(in.d)
		e.out[p], e.in[p] = out, in
		e.outs = append(e.outs, out)
		e.ins = append(e.ins, in)
	}
	if len(local) == e.size && l.hasAreas() {
		e.areas = newAreas(e, mem, l, me)
	}
}
