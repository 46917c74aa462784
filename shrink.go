package comm

// Shrink, as MPI ULFM's MPI_Comm_shrink: after a failure the survivors
// agree through the store on who is still alive and open a new world of
// them, with fresh connections under a fresh key prefix.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/profile"
	"github.com/gocomm/comm/rendezvous"
)

// ErrShrinkExcluded is returned by Shrink to a rank the survivors' agreed
// membership leaves out: it came after the membership was settled.
var ErrShrinkExcluded = errors.New("comm: Shrink: the survivors agreed on a membership without this rank (it arrived after the membership was settled)")

// shrinkLineage is the store namespace of an Init world's shrinks.
const shrinkLineage = "gocomm/shrink"

// shrinkState is what a world keeps for Shrink.
type shrinkState struct {
	driver    string         // backend name
	cfg       backend.Config // how the world was opened (Store, Rank and Size are the world's)
	profiling *profile.Config
	lineage   string // store namespace of this world's shrinks

	mu    sync.Mutex // protects following
	calls map[uint64]int
	dead  []int // world ranks failures named as lost
	// owned is a store this world must close on Close: the store Init
	// opened, handed on by the world that shrank into this one.
	owned rendezvous.Store
}

func (s *shrinkState) init(driver string, cfg backend.Config, prof *profile.Config) {
	s.driver, s.cfg, s.profiling, s.lineage = driver, cfg, prof, shrinkLineage
}

// noteFailure remembers the ranks a failed operation's error names as
// lost: Shrink excludes them without waiting.
func (c *Comm) noteFailure(err error) {
	dead := deadRanks(err)
	if len(dead) == 0 {
		return
	}
	s := &c.shrink
	s.mu.Lock()
	for _, r := range dead {
		if !slices.Contains(s.dead, r) {
			s.dead = append(s.dead, r)
		}
	}
	s.mu.Unlock()
}

// next numbers the Shrink calls on communicator id.
func (s *shrinkState) next(id uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = make(map[uint64]int)
	}
	s.calls[id]++
	return s.calls[id]
}

func (s *shrinkState) knownDead() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.dead)
}

// takeOwned returns the store this world must close, once.
func (s *shrinkState) takeOwned() rendezvous.Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.owned
	s.owned = nil
	return st
}

// aliveMsg is what a survivor posts: that it is alive, and the ranks of
// the communicator its failures named as lost.
type aliveMsg struct {
	Dead []int `json:"dead"`
}

// Shrink returns a new world made of the ranks of c that are still alive,
// as MPI_Comm_shrink does: every surviving rank of c calls it after a
// failure (the old communicator stays aborted; close it after). The
// survivors agree through the world's store: each posts that it is alive,
// the ranks earlier failures named as lost are excluded at once, the
// others get until half of ctx's remaining time (without a deadline, a
// quarter of the communicator's timeout, at most 30 s) to post, and then
// the lowest surviving rank writes the membership (if it dies meanwhile,
// the next one does); every caller gets that same membership or an error.
// Rank i of the new world is the i-th survivor in c's rank order.
//
// The new world has its own connections, under a fresh key prefix of the
// store, its own sequence numbers and flight recorder, c's timeout, and
// the world's debug endpoints (GOCOMM_DEBUG_ADDR, SIGUSR1), which move to it;
// LocalRank, LocalSize and NodeRank are the survivors' own (a backend that
// cannot tell hosts apart takes each world as one host). The store must still be served: under commrun and
// torchrun rank 0 hosts it, so Shrink cannot recover from the loss of rank
// 0 unless the store lives elsewhere (a file store, torchrun's agent
// store). A rank the agreed membership leaves out gets ErrShrinkExcluded.
// Shrink needs a store: worlds from NewLocalWorld, worlds of one and the
// MPI backend cannot shrink. Calling it concurrently on one communicator
// is an error of the program.
func (c *Comm) Shrink(ctx context.Context) (*Comm, error) {
	if err := c.usable("Shrink"); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, errNilContext("Shrink")
	}
	if c.closedNow() {
		return nil, fmt.Errorf("%w: Shrink", ErrClosed)
	}
	root := c.root()
	st := &root.shrink
	if st.cfg.Store == nil {
		return nil, errors.New("comm: Shrink needs the rendezvous store the world was made with; this world has none (NewLocalWorld, a world of one, or a backend that meets without one)")
	}
	// The settling time comes from the caller's ctx: without a deadline
	// it is a quarter of the timeout (at most 30 s), not half of the
	// timeout the agreement itself is bounded by below.
	settle := shrinkSettle(ctx, c.timeout)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	base := st.lineage + "/" + strconv.FormatUint(c.id, 16) + "/" + strconv.Itoa(st.next(c.id))
	members, err := agreeSurvivors(ctx, st.cfg.Store, base, c.size, c.rank, c.commRanks(st.knownDead()), settle)
	if err != nil {
		return nil, fmt.Errorf("comm: Shrink: rank %d of %d: agreeing on the survivors: %w", c.rank, c.size, err)
	}
	rank := slices.Index(members, c.rank)
	if rank < 0 {
		return nil, fmt.Errorf("%w (agreed: ranks %v)", ErrShrinkExcluded, members)
	}
	cfg := st.cfg
	cfg.Rank, cfg.Size = rank, len(members)
	cfg.LocalRank, cfg.LocalSize = root.local.rank, root.local.size
	view := rendezvous.NewPrefixStore(base+"/world", st.cfg.Store)
	cfg.Store = view
	be, err := backend.Open(ctx, st.driver, cfg)
	if err != nil {
		view.Close()
		return nil, fmt.Errorf("comm: Shrink: rank %d of the %d survivors %v: opening the new world: %w", rank, len(members), members, err)
	}
	nc := newWorld(be, c.timeout, c.log)
	nc.backendName = st.driver
	nc.prof = newProfiler(st.profiling, rank)
	nc.local.rank, nc.local.size = localOf(nc)
	nc.store, nc.ownStore = view, true
	nc.shrink.init(st.driver, cfg, st.profiling)
	// Later shrinks and grows meet in the whole store, under full key
	// paths: newcomers (Join) look for their keys there.
	nc.shrink.cfg.Store = st.cfg.Store
	nc.shrink.lineage = base
	// The store Init opened now belongs to the new world: closing the old
	// one must not stop it (rank 0 serves it to the others).
	root.mu.Lock()
	if root.ownStore {
		root.ownStore = false
		nc.shrink.owned = root.store
	}
	root.mu.Unlock()
	if owned := st.takeOwned(); owned != nil {
		nc.shrink.owned = owned
	}
	if err := nc.startFlightExchange(); err != nil {
		nc.Close()
		return nil, err
	}
	if err := root.handDebugTo(nc); err != nil {
		nc.Close()
		return nil, fmt.Errorf("comm: Shrink: moving the debug endpoints to the new world: %w", err)
	}
	c.log.Info("comm: shrank past failed ranks", "old_rank", c.rank, "old_size", c.size, "new_rank", rank, "survivors", members)
	return nc, nil
}

// commRanks translates world ranks into c's ranks, dropping non-members.
func (c *Comm) commRanks(world []int) []int {
	var out []int
	for _, w := range world {
		if r := c.GroupRank(w); r >= 0 {
			out = append(out, r)
		}
	}
	return out
}

// shrinkSettle is how long Shrink waits for ranks it does not know to be
// dead: half of ctx's remaining time, else a quarter of the timeout, at
// most 30 s.
func shrinkSettle(ctx context.Context, timeout time.Duration) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d) / 2
	}
	return min(timeout/4, 30*time.Second)
}

// agreeSurvivors runs the agreement of one Shrink (keys under base) among
// the size ranks of a communicator, for rank me, which knows dead to be
// dead, and returns the agreed members in ascending order.
func agreeSurvivors(ctx context.Context, store rendezvous.Store, base string, size, me int, dead []int, settle time.Duration) ([]int, error) {
	aliveKey := func(r int) string { return base + "/alive/" + strconv.Itoa(r) }
	decisionKey := base + "/members"
	mine, _ := json.Marshal(aliveMsg{Dead: dead})
	if err := store.Set(ctx, aliveKey(me), mine); err != nil {
		return nil, err
	}
	start := time.Now()
	alive := map[int]bool{me: true}
	gone := map[int]bool{}
	for _, r := range dead {
		gone[r] = true
	}
	var settledAt time.Time
	const poll = 20 * time.Millisecond
	// A leader that dies while deciding is replaced by the next survivor
	// after step.
	step := max(settle/4, 200*time.Millisecond)
	for {
		if ok, err := store.Check(ctx, decisionKey); err != nil {
			return nil, err
		} else if ok {
			raw, err := store.Get(ctx, decisionKey)
			if err != nil {
				return nil, err
			}
			return parseMembers(raw, size)
		}
		for r := range size {
			if alive[r] {
				continue
			}
			ok, err := store.Check(ctx, aliveKey(r))
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			raw, err := store.Get(ctx, aliveKey(r))
			if err != nil {
				return nil, err
			}
			var m aliveMsg
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, fmt.Errorf("rank %d posted an unreadable alive message %q", r, truncateBytes(raw, 80))
			}
			alive[r] = true
			for _, d := range m.Dead {
				gone[d] = true
			}
		}
		pending := 0
		for r := range size {
			if !alive[r] && !gone[r] {
				pending++
			}
		}
		now := time.Now()
		if settledAt.IsZero() && (pending == 0 || now.Sub(start) >= settle) {
			settledAt = now
		}
		if !settledAt.IsZero() {
			members := aliveMembers(alive, size)
			pos := slices.Index(members, me)
			if now.Sub(settledAt) >= time.Duration(pos)*step {
				desired, _ := json.Marshal(members)
				raw, err := store.CompareAndSet(ctx, decisionKey, nil, desired)
				if err != nil {
					return nil, err
				}
				return parseMembers(raw, size)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no membership was agreed before the context ended (%d ranks alive so far, %d not heard from): %w",
				len(alive), pending, ctx.Err())
		case <-time.After(poll):
		}
	}
}

func aliveMembers(alive map[int]bool, size int) []int {
	var ms []int
	for r := range size {
		if alive[r] {
			ms = append(ms, r)
		}
	}
	return ms
}

// parseMembers reads an agreed membership and checks it.
func parseMembers(raw []byte, size int) ([]int, error) {
	var ms []int
	if err := json.Unmarshal(raw, &ms); err != nil {
		return nil, fmt.Errorf("the store holds an unreadable membership %q", truncateBytes(raw, 80))
	}
	if len(ms) == 0 || !strictlyIncreasing(ms) || ms[0] < 0 || ms[len(ms)-1] >= size {
		return nil, fmt.Errorf("the store holds an invalid membership %v for %d ranks", ms, size)
	}
	return ms, nil
}

// strictlyIncreasing reports whether ms is sorted with no rank twice.
func strictlyIncreasing(ms []int) bool {
	for i := 1; i < len(ms); i++ {
		if ms[i] <= ms[i-1] {
			return false
		}
	}
	return true
}
