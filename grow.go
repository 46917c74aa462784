package comm

// Grow and Join, as NCCL's ncclCommGrow: processes started after a world
// (replacements for failed ranks, or new capacity) join it. The world's
// ranks and the newcomers meet through the world's store: a newcomer takes
// a ticket and waits; the world, at a step of its choosing, admits every
// ticket taken so far and all open a new world with fresh connections
// under a fresh key prefix, as Shrink does.
//
// The store keys, outside every world's prefix so that a newcomer finds
// them whatever shrinks and grows came before:
//
//	gocomm/grow/tickets     counter: tickets taken by newcomers
//	gocomm/grow/admitted    the last ticket admitted (absent: none)
//	gocomm/grow/admit/<t>   ticket t's admission: the new world's prefix, rank and size
//
// and, per Grow, <lineage>/<comm id>/grow<k>/decision for the world's own
// ranks.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/env"
	"github.com/gocomm/comm/rendezvous"
)

const (
	growTicketsKey  = "gocomm/grow/tickets"
	growAdmittedKey = "gocomm/grow/admitted"
)

func growAdmitKey(ticket int64) string {
	return "gocomm/grow/admit/" + strconv.FormatInt(ticket, 10)
}

// admission is what a grown world's ranks learn: where the new world
// meets, its size, and (for a newcomer) its rank.
type admission struct {
	Base string `json:"base"`
	Rank int    `json:"rank"`
	Size int    `json:"size"`
}

// Joiners returns how many processes are waiting in Join to be admitted to
// c, the same number on every rank (rank 0 reads the store and broadcasts
// it): a collective, so that every rank of a training loop takes the same
// decision to call Grow. It needs a store, as Grow does.
func (c *Comm) Joiners(ctx context.Context) (int, error) {
	if err := c.growable("Joiners", ctx); err != nil {
		return 0, err
	}
	store := c.shrink.cfg.Store
	n := []int64{0}
	if c.rank == 0 {
		tickets, admitted, err := growCounts(ctx, store)
		if err != nil {
			return 0, fmt.Errorf("comm: Joiners: reading the store: %w", err)
		}
		n[0] = tickets - admitted
	}
	if err := Broadcast(ctx, c, n, 0); err != nil {
		return 0, err
	}
	return int(n[0]), nil
}

// growable checks that Grow or Joiners can run on c.
func (c *Comm) growable(op string, ctx context.Context) error {
	if err := c.usable(op); err != nil {
		return err
	}
	if ctx == nil {
		return errNilContext(op)
	}
	if c.closedNow() {
		return fmt.Errorf("%w: %s", ErrClosed, op)
	}
	if c.root() != c {
		return fmt.Errorf("%w: %s: c is a group; grow the world it was made from, then make the group again", ErrInvalid, op)
	}
	if c.shrink.cfg.Store == nil {
		return fmt.Errorf("comm: %s needs the rendezvous store the world was made with; this world has none (NewLocalWorld, a world of one, or a backend that meets without one)", op)
	}
	return nil
}

// growCounts reads how many tickets newcomers took and how many of them
// were admitted.
func growCounts(ctx context.Context, store rendezvous.Store) (tickets, admitted int64, err error) {
	if tickets, err = store.Add(ctx, growTicketsKey, 0); err != nil {
		return 0, 0, err
	}
	ok, err := store.Check(ctx, growAdmittedKey)
	if err != nil || !ok {
		return tickets, 0, err
	}
	raw, err := store.Get(ctx, growAdmittedKey)
	if err != nil {
		return 0, 0, err
	}
	if admitted, err = strconv.ParseInt(string(raw), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("the store holds an unreadable %s %q", growAdmittedKey, truncateBytes(raw, 40))
	}
	return tickets, admitted, nil
}

// Grow returns a new world made of c's ranks followed by the processes
// waiting in Join, as NCCL's ncclCommGrow: every rank of c calls it (c
// stays usable; close it after), at a step where the program can hand its
// state to newcomers (Joiners says whether any wait). Rank 0 of c admits
// every newcomer that took a ticket by then, in ticket order; c's ranks
// keep their ranks, newcomers get the next ones. With none waiting, the new
// world has c's ranks only.
//
// The new world has its own connections under a fresh key prefix of the
// store, so nothing of c is ever matched in it; c's timeout, profiler
// settings and debug endpoints (which move to it); and LocalRank, LocalSize
// and NodeRank for its own ranks. Grow and Shrink compose: a world that
// lost ranks shrinks, then grows. The store must still be served (see
// Shrink). Grow is bounded by ctx, else by c's timeout; a newcomer that
// dies before connecting makes it fail naming that rank, and the others
// can then Shrink. c must be a world (Init's, or one Grow, Shrink or Join
// returned), not a group.
func (c *Comm) Grow(ctx context.Context) (*Comm, error) {
	if err := c.growable("Grow", ctx); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	st := &c.shrink
	store := st.cfg.Store
	base := st.lineage + "/" + strconv.FormatUint(c.id, 16) + "/grow" + strconv.Itoa(st.next(c.id))
	decisionKey := base + "/decision"
	var dec admission
	if c.rank == 0 {
		tickets, admitted, err := growCounts(ctx, store)
		if err != nil {
			return nil, fmt.Errorf("comm: Grow: reading the newcomers' tickets: %w", err)
		}
		dec = admission{Base: base, Size: c.size + int(tickets-admitted)}
		// Newcomers learn their admission first, so that they start
		// connecting while the world's ranks read the decision.
		for t := admitted + 1; t <= tickets; t++ {
			a := admission{Base: base, Rank: c.size + int(t-admitted-1), Size: dec.Size}
			raw, _ := json.Marshal(a)
			if err := store.Set(ctx, growAdmitKey(t), raw); err != nil {
				return nil, fmt.Errorf("comm: Grow: admitting ticket %d: %w", t, err)
			}
		}
		if err := store.Set(ctx, growAdmittedKey, []byte(strconv.FormatInt(tickets, 10))); err != nil {
			return nil, fmt.Errorf("comm: Grow: %w", err)
		}
		raw, _ := json.Marshal(dec)
		if err := store.Set(ctx, decisionKey, raw); err != nil {
			return nil, fmt.Errorf("comm: Grow: %w", err)
		}
	} else {
		raw, err := store.Get(ctx, decisionKey)
		if err != nil {
			return nil, fmt.Errorf("comm: Grow: rank %d of %d: waiting for rank 0's decision: %w", c.rank, c.size, err)
		}
		if err := json.Unmarshal(raw, &dec); err != nil || dec.Base != base || dec.Size < c.size {
			return nil, fmt.Errorf("comm: Grow: rank %d of %d: the store holds an invalid decision %q", c.rank, c.size, truncateBytes(raw, 80))
		}
	}
	cfg := st.cfg
	cfg.Rank, cfg.Size = c.rank, dec.Size
	nc, err := openGrown(ctx, st.driver, cfg, base, c.timeout, c)
	if err != nil {
		if dec.Size > c.size {
			return nil, fmt.Errorf("comm: Grow: rank %d of the %d ranks of the grown world: %w (this Grow admitted %s as newcomers: one that died after its admission never connects; c is still usable)",
				c.rank, dec.Size, err, rankRanges(seq(c.size, dec.Size)))
		}
		return nil, fmt.Errorf("comm: Grow: rank %d of the %d ranks of the grown world: %w", c.rank, dec.Size, err)
	}
	// The store Init opened now belongs to the new world (see Shrink).
	c.mu.Lock()
	if c.ownStore {
		c.ownStore = false
		nc.shrink.owned = c.store
	}
	c.mu.Unlock()
	if owned := st.takeOwned(); owned != nil {
		nc.shrink.owned = owned
	}
	if err := nc.startFlightExchange(); err != nil {
		nc.Close()
		return nil, err
	}
	if err := c.handDebugTo(nc); err != nil {
		nc.Close()
		return nil, fmt.Errorf("comm: Grow: moving the debug endpoints to the new world: %w", err)
	}
	c.log.Info("comm: grew", "rank", c.rank, "old_size", c.size, "new_size", nc.size)
	return nc, nil
}

// openGrown opens the world a Grow or Join agreed on (keys under base) and
// makes it a world that can shrink and grow again; the caller starts its
// flight recorder. from is the world it grew from (nil for a newcomer).
func openGrown(ctx context.Context, driver string, cfg backend.Config, base string, timeout time.Duration, from *Comm) (*Comm, error) {
	view := rendezvous.NewPrefixStore(base+"/world", cfg.Store)
	store := cfg.Store
	cfg.Store = view
	be, err := backend.Open(ctx, driver, cfg)
	if err != nil {
		view.Close()
		return nil, fmt.Errorf("opening the new world: %w", err)
	}
	var nc *Comm
	if from != nil {
		nc = newWorld(be, timeout, from.log)
		nc.prof = newProfiler(from.shrink.profiling, be.Rank())
		nc.shrink.init(driver, cfg, from.shrink.profiling)
	} else {
		nc = newWorld(be, timeout, cfg.Logger)
		nc.shrink.init(driver, cfg, nil)
	}
	nc.backendName = driver
	nc.store, nc.ownStore = view, true
	nc.shrink.cfg.Store = store
	nc.shrink.lineage = base
	nc.local.rank, nc.local.size = localOf(nc)
	return nc, nil
}

// localOf is a world's LocalRank and LocalSize from its backend's host
// layout: the ranks sharing this rank's host, in rank order. Without a
// layout, a world's host share is unknown and it is taken as its own.
func localOf(c *Comm) (rank, size int) {
	hosts := c.hostLayout()
	if hosts == nil {
		return c.rank, c.size
	}
	for r, h := range hosts {
		if h != hosts[c.rank] {
			continue
		}
		if r < c.rank {
			rank++
		}
		size++
	}
	return rank, size
}

// ErrNotAdmitted is returned by Join when the running world did not admit
// this process before ctx ended (or Options.Timeout passed): it did not
// call Grow in that time, or the job has ended.
var ErrNotAdmitted = errors.New("comm: Join: not admitted to the running world")

// Join makes this process a new rank of a running world, as a newcomer of
// NCCL's ncclCommGrow: it meets the world where Init's ranks met (the same
// MASTER_ADDR and MASTER_PORT or GOCOMM_INIT_METHOD, or Options.Store),
// takes a ticket and waits until the world's ranks call Grow, which admits
// it with the next free rank; RANK and WORLD_SIZE, if set, are ignored.
// The world's store must still be served and must not be hosted by this
// process (with the TCP store, rank 0 hosts it; an etcd or file store has
// no such host). Join is bounded by ctx, else by the timeout (Options.Timeout,
// GOCOMM_TIMEOUT, DefaultTimeout), and returns ErrNotAdmitted when it ends
// before the world admits it. Of Options, Rank and Size are ignored.
func Join(ctx context.Context, opts Options) (*Comm, error) {
	if ctx == nil {
		return nil, errNilContext("Join")
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	// Where to meet is read as Init reads it, as a rank other than 0 of
	// a world large enough for any local rank: the rank is assigned at
	// admission, and a newcomer never hosts the store.
	opts.Getenv = func(k string) string {
		switch k {
		case env.EnvRank:
			return "1"
		case env.EnvWorldSize:
			n := 2
			for _, v := range []string{getenv(env.EnvWorldSize), getenv(env.EnvLocalWorldSize)} {
				if m, err := strconv.Atoi(v); err == nil && m+1 > n {
					n = m + 1
				}
			}
			return strconv.Itoa(n)
		}
		return getenv(k)
	}
	opts.Rank, opts.Size = 0, 0
	if opts.Store != nil {
		opts.Rank, opts.Size = 1, 2
	}
	cfg, err := resolve(opts)
	if err != nil {
		return nil, fmt.Errorf("comm: Join: %w", err)
	}
	if cfg.ownBootstrap {
		return nil, fmt.Errorf("%w: Join: backend %q meets without a store and cannot admit newcomers", ErrInvalid, cfg.backend)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	store, own := opts.Store, false
	if store == nil {
		if store, err = cfg.openStore(ctx); err != nil {
			return nil, fmt.Errorf("comm: Join: %w", err)
		}
		own = true
	}
	fail := func(err error) (*Comm, error) {
		if own {
			store.Close()
		}
		return nil, err
	}
	ticket, err := store.Add(ctx, growTicketsKey, 1)
	if err != nil {
		return fail(fmt.Errorf("comm: Join: taking a ticket in the %s: %w", cfg.meetingPlace(), err))
	}
	raw, err := store.Get(ctx, growAdmitKey(ticket))
	if err != nil {
		if ctx.Err() != nil {
			return fail(fmt.Errorf("%w (ticket %d in the %s): the world did not call Grow before %v: %w", ErrNotAdmitted, ticket, cfg.meetingPlace(), ctx.Err(), err))
		}
		return fail(fmt.Errorf("comm: Join: waiting for admission (ticket %d in the %s): %w", ticket, cfg.meetingPlace(), err))
	}
	var a admission
	if err := json.Unmarshal(raw, &a); err != nil || a.Size < 2 || a.Rank < 1 || a.Rank >= a.Size {
		return fail(fmt.Errorf("comm: Join: the store holds an invalid admission %q for ticket %d", truncateBytes(raw, 80), ticket))
	}
	bcfg := backend.Config{
		Rank: a.Rank, Size: a.Size,
		LocalRank: cfg.localRank, LocalSize: cfg.localSize,
		Store: store, Timeout: cfg.timeout, Secret: cfg.secret,
		ListenHost: cfg.listenHost, Algorithms: cfg.algorithms, Logger: cfg.logger,
		Transport: cfg.transport,
	}
	bcfg.Transport.Interface = cfg.socketIfname
	bcfg.Transport.MasterHost, _, _ = net.SplitHostPort(cfg.rdzv.Addr)
	if la, ok := store.(interface{ LocalAddr() net.Addr }); ok {
		if ta, ok := la.LocalAddr().(*net.TCPAddr); ok {
			bcfg.Transport.StoreLocalIP = ta.IP.String()
		}
	}
	nc, err := openGrown(ctx, cfg.backend, bcfg, a.Base, cfg.timeout, nil)
	if err != nil {
		return fail(fmt.Errorf("comm: Join: rank %d of %d: %w", a.Rank, a.Size, err))
	}
	nc.prof = newProfiler(cfg.profiling, a.Rank)
	nc.shrink.profiling = cfg.profiling
	if own {
		nc.shrink.owned = store
	}
	if err := nc.startFlight(opts); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}

// seq is [lo, hi).
func seq(lo, hi int) []int {
	out := make([]int, 0, hi-lo)
	for r := lo; r < hi; r++ {
		out = append(out, r)
	}
	return out
}
