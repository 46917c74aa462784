package comm

// When a collective times out, the ranks compare flight recorders through
// the store, so that every rank's error says who never entered the
// operation and who is still inside it (torch's "desync debug"). The rank
// whose operation timed out first posts the incident (which operation, of
// which communicator, with which members); every rank that fails because
// of it, and every other rank's watcher goroutine, posts its recorders'
// heads; each failing rank then reads the members' heads for a bounded
// time (a dead rank never answers, and the report says so).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/rendezvous"
)

// Store keys of the exchange, under the world's store (a shrunk world's
// store is a fresh prefix of its parent's).
const (
	flightIncidentKey = "gocomm/flightrec/incident"
	flightHeadKey     = "gocomm/flightrec/head/" // + world rank
)

// flightHeadOps is how many recent operations per communicator a rank posts.
const flightHeadOps = 16

// flightIncident is the operation whose timeout started an exchange.
type flightIncident struct {
	Comm  uint64 `json:"comm"`
	Seq   uint64 `json:"seq"`
	Op    string `json:"op"`
	Rank  int    `json:"rank"`  // world rank that posted it
	Ranks []int  `json:"ranks"` // the communicator's members' world ranks
}

// flightExchange runs one world's exchange: at most once, since a timeout
// aborts the world.
type flightExchange struct {
	store rendezvous.Store // nil: no exchange (no store, or a world of one)
	rank  int              // world rank
	grace time.Duration    // how long a rank waits for the others' answers
	stop  context.CancelFunc
	done  chan struct{} // closed when the watcher has returned

	mu      sync.Mutex // protects following
	posted  bool       // this rank's head is in the store (it is posted once: as it was at the incident)
	started bool
	ready   chan struct{} // closed when report is final
	report  *DesyncError  // nil when the exchange failed
	note    string        // why the exchange failed
}

// watcherMaxFailures is how many store Checks in a row may fail before
// the watcher gives up on the store.
const watcherMaxFailures = 5

// flightGrace is how long the exchange waits for answers: a fortieth of
// the communicator's timeout, within [200ms, 10s]. It is what a timed-out
// operation's error takes past the timeout when a rank does not answer
// (dead, or beyond a partition), so it is short; a live rank answers in a
// few store round trips, since the abort that comes with the incident
// wakes its watcher.
func flightGrace(timeout time.Duration) time.Duration {
	return min(max(timeout/40, 200*time.Millisecond), 10*time.Second)
}

// watcherInterval is how often the watcher looks for an incident while
// the world is sound: a fortieth of the timeout, within [250ms, 1s].
func watcherInterval(timeout time.Duration) time.Duration {
	return min(max(timeout/40, 250*time.Millisecond), time.Second)
}

// watcherFastInterval is how often the watcher looks once the world has
// failed (an incident is then posted within moments, or never), for
// watcherFastPolls looks at most.
const (
	watcherFastInterval = 20 * time.Millisecond
	watcherFastPolls    = 100
)

// startWatcher starts the goroutine that answers other ranks' incidents
// with this rank's recorders. It polls the store (a Check every
// watcherInterval) rather than blocking in it, so that a file store is
// not read a hundred times a second for the life of the job; once failed
// is closed (the world failed: a timed-out rank's abort arrives just
// before its incident is posted) it polls every watcherFastInterval for a
// while, so that it answers well within the exchange's grace. failed may
// be nil.
func (f *flightWorld) startWatcher(store rendezvous.Store, timeout time.Duration, failed <-chan struct{}) {
	x := &f.exchange
	x.store, x.rank, x.grace = store, f.rank, flightGrace(timeout)
	ctx, cancel := context.WithCancel(context.Background())
	x.stop, x.done = cancel, make(chan struct{})
	interval := watcherInterval(timeout)
	go func() {
		defer close(x.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		failures, fast := 0, 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-failed:
				failed, fast = nil, watcherFastPolls
				t.Reset(watcherFastInterval)
			}
			if fast > 0 {
				if fast--; fast == 0 {
					t.Reset(interval)
				}
			}
			// Bounded: a store whose server is gone must not hold the
			// watcher in a dial loop. One failed Check (a reset
			// connection, a slow store) is retried at the next tick;
			// only a store that keeps failing ends the watcher, since
			// nothing can be exchanged through it any more.
			cctx, cancel := context.WithTimeout(ctx, x.grace)
			ok, err := store.Check(cctx, flightIncidentKey)
			cancel()
			if err != nil {
				if failures++; failures >= watcherMaxFailures {
					return
				}
				continue
			}
			failures = 0
			if ok {
				// Bounded too: the store may have become unreachable
				// since the Check (a partition), and a failing
				// operation's exchange waits for this post to end
				// (postHead holds the exchange's lock).
				pctx, cancel := context.WithTimeout(ctx, x.grace)
				f.postHead(pctx)
				cancel()
				return
			}
		}
	}()
}

// stopWatcher stops the watcher and waits for it; safe without one.
func (f *flightWorld) stopWatcher() {
	x := &f.exchange
	if x.stop != nil {
		x.stop()
		<-x.done
	}
}

// postHead posts this rank's recorders, once: the watcher or the failing
// operation, whichever comes first, posts them as they were when the
// incident was noticed, before later operations fail at once on the
// aborted world.
func (f *flightWorld) postHead(ctx context.Context) error {
	x := &f.exchange
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.posted {
		return nil
	}
	head, err := json.Marshal(f.record(flightHeadOps))
	if err != nil {
		return err
	}
	if err := x.store.Set(ctx, flightHeadKey+strconv.Itoa(f.rank), head); err != nil {
		return err
	}
	x.posted = true
	return nil
}

// explainFailure is called with every failed operation's error. A timeout
// of a collective (this rank's, or another's that aborted the world) on a
// world with a store starts the exchange, or joins it, and returns the
// error wrapped in a *DesyncError; other errors are returned as they are.
func (c *Comm) explainFailure(req *backend.Request, err error) error {
	root := c.root()
	root.noteFailure(err)
	f := root.flight
	if f == nil || f.exchange.store == nil || req.Seq == 0 {
		return err
	}
	own, remote := timeoutCause(err)
	if !own && !remote {
		return err
	}
	var inc *flightIncident
	if own {
		inc = &flightIncident{Comm: c.id, Seq: req.Seq, Op: opName(req.Kind), Rank: f.rank, Ranks: c.global}
	}
	rep, note := f.runExchange(inc, deadRanks(err))
	if rep == nil {
		return fmt.Errorf("%w (flight recorder: %s)", err, note)
	}
	d := *rep
	d.Err = err
	return &d
}

// timeoutCause reports whether err is this rank's timeout, or an abort by
// a rank whose operation timed out.
func timeoutCause(err error) (own, remote bool) {
	var ra *core.RemoteAbortError
	if errors.As(err, &ra) {
		// An older peer's abort names no kind: its text does.
		return false, ra.Kind == core.FailTimeout || strings.Contains(ra.Reason, context.DeadlineExceeded.Error())
	}
	return errors.Is(err, context.DeadlineExceeded), false
}

// deadRanks lists the world ranks err says are gone: lost (their
// connection broke without a goodbye, or a peer's abort says so) or
// closed. Neither answers the exchange nor comes to Shrink.
func deadRanks(err error) []int {
	var dead []int
	add := func(r int) {
		if r >= 0 && !slices.Contains(dead, r) {
			dead = append(dead, r)
		}
	}
	walkErrors(err, func(e error) {
		switch e := e.(type) {
		case *core.PeerError:
			if errors.Is(e.Err, core.ErrPeerLost) || errors.Is(e.Err, core.ErrPeerClosed) {
				add(e.Peer)
			}
		case *core.RemoteAbortError:
			if e.Kind == core.FailLost || e.Kind == core.FailClosed {
				add(e.Origin)
			}
		}
	})
	slices.Sort(dead)
	return dead
}

// walkErrors calls fn on err and everything it wraps.
func walkErrors(err error, fn func(error)) {
	if err == nil {
		return
	}
	fn(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walkErrors(u.Unwrap(), fn)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walkErrors(e, fn)
		}
	}
}

// runExchange runs the world's exchange once; concurrent and later callers
// get the same report.
func (f *flightWorld) runExchange(own *flightIncident, dead []int) (*DesyncError, string) {
	x := &f.exchange
	x.mu.Lock()
	if x.started {
		ready := x.ready
		x.mu.Unlock()
		<-ready
		return x.report, x.note
	}
	x.started, x.ready = true, make(chan struct{})
	x.mu.Unlock()
	rep, note := f.exchangeHeads(own, dead)
	x.mu.Lock()
	x.report, x.note = rep, note
	x.mu.Unlock()
	close(x.ready)
	return rep, note
}

func (f *flightWorld) exchangeHeads(own *flightIncident, dead []int) (*DesyncError, string) {
	x := &f.exchange
	// Two grace periods at most: one to learn the incident, one for the
	// answers.
	ctx, cancel := context.WithTimeout(context.Background(), x.grace)
	defer cancel()
	var raw []byte
	var err error
	if own != nil {
		mine, _ := json.Marshal(own)
		raw, err = x.store.CompareAndSet(ctx, flightIncidentKey, nil, mine)
	} else {
		raw, err = x.store.Get(ctx, flightIncidentKey)
	}
	if err != nil {
		return nil, fmt.Sprintf("could not learn which operation timed out through the store: %v", err)
	}
	var inc flightIncident
	if err := json.Unmarshal(raw, &inc); err != nil || len(inc.Ranks) == 0 {
		return nil, fmt.Sprintf("the store holds an unreadable incident %q", truncateBytes(raw, 80))
	}
	ctx, cancel = context.WithTimeout(context.Background(), x.grace)
	defer cancel()
	if err := f.postHead(ctx); err != nil {
		return nil, fmt.Sprintf("could not post this rank's recorder to the store: %v", err)
	}
	heads := f.collectHeads(ctx, inc.Ranks, dead)
	rep := analyzeDesync(inc, heads, dead, x.grace)
	return &rep, ""
}

// collectHeads reads the posted heads of ranks (world ranks), skipping the
// dead, until all are there or ctx is done.
func (f *flightWorld) collectHeads(ctx context.Context, ranks, dead []int) map[int]FlightRecord {
	heads := make(map[int]FlightRecord, len(ranks))
	for {
		missing := 0
		for _, w := range ranks {
			if _, ok := heads[w]; ok || slices.Contains(dead, w) {
				continue
			}
			key := flightHeadKey + strconv.Itoa(w)
			if ok, err := f.exchange.store.Check(ctx, key); err == nil && ok {
				if raw, err := f.exchange.store.Get(ctx, key); err == nil {
					var fr FlightRecord
					if json.Unmarshal(raw, &fr) == nil {
						heads[w] = fr
						continue
					}
				}
			}
			missing++
		}
		if missing == 0 {
			return heads
		}
		select {
		case <-ctx.Done():
			return heads
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func truncateBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// DesyncError is the error of a collective that timed out, explained by
// the ranks' flight recorders: which ranks of the communicator never
// entered the operation, which are inside it, which had completed it,
// which did not answer (dead, or their process is stuck) and which were
// known dead. Ranks are the communicator's; Err is the original error.
type DesyncError struct {
	Op   string // the operation that timed out first (all_reduce, ...)
	Seq  uint64 // its sequence number
	Comm uint64 // the communicator's id
	// Rank is the world rank whose timeout started the exchange.
	Rank                                            int
	NeverEntered, Inside, Completed, NoAnswer, Dead []int
	// Detail says, for each rank that never entered, where it was.
	Detail string
	Err    error
}

func (e *DesyncError) Error() string {
	return e.Err.Error() + "; flight recorder: " + e.Detail
}

// Unwrap returns the original error.
func (e *DesyncError) Unwrap() error { return e.Err }

// analyzeDesync compares the members' heads against the incident. It is a
// pure function of what the ranks posted.
func analyzeDesync(inc flightIncident, heads map[int]FlightRecord, dead []int, grace time.Duration) DesyncError {
	d := DesyncError{Op: inc.Op, Seq: inc.Seq, Comm: inc.Comm, Rank: inc.Rank}
	var where []string
	for i, w := range inc.Ranks {
		head, ok := heads[w]
		switch {
		case !ok && slices.Contains(dead, w):
			d.Dead = append(d.Dead, i)
			continue
		case !ok:
			d.NoAnswer = append(d.NoAnswer, i)
			continue
		}
		fc := findComm(head, inc.Comm)
		if op, ok := findSeq(fc, inc.Seq); ok && op.Op != inc.Op {
			d.NeverEntered = append(d.NeverEntered, i)
			where = append(where, fmt.Sprintf("rank %d entered %s #%d instead (%s)", i, op.Op, op.Seq, op.State))
			continue
		} else if ok {
			if op.State == flightDone.String() {
				d.Completed = append(d.Completed, i)
			} else {
				d.Inside = append(d.Inside, i)
			}
			continue
		}
		last, ok := lastCollective(fc)
		if ok && last.Seq > inc.Seq {
			d.Completed = append(d.Completed, i) // it left the ring already
			continue
		}
		d.NeverEntered = append(d.NeverEntered, i)
		where = append(where, fmt.Sprintf("rank %d %s", i, describeLast(last, ok, head, inc.Comm)))
	}
	var parts []string
	name := fmt.Sprintf("%s #%d", inc.Op, inc.Seq)
	if len(d.NeverEntered) > 0 {
		s := fmt.Sprintf("%s never entered it", rankList(d.NeverEntered))
		parts = append(parts, s+" ("+strings.Join(where, ", ")+")")
	}
	if len(d.Inside) > 0 {
		parts = append(parts, rankList(d.Inside)+" entered it and did not complete it")
	}
	if len(d.Completed) > 0 {
		parts = append(parts, rankList(d.Completed)+" completed it")
	}
	if len(d.NoAnswer) > 0 {
		parts = append(parts, fmt.Sprintf("%s did not answer within %v (dead, or the process is stuck)", rankList(d.NoAnswer), grace))
	}
	if len(d.Dead) > 0 {
		parts = append(parts, rankList(d.Dead)+" gone (connection lost, or communicator closed)")
	}
	comm := ""
	if inc.Comm != 1 {
		comm = fmt.Sprintf(" of communicator %#x (ranks of the communicator)", inc.Comm)
	}
	d.Detail = fmt.Sprintf("timed out in %s%s (first on world rank %d): %s", name, comm, inc.Rank, strings.Join(parts, "; "))
	return d
}

func findComm(fr FlightRecord, id uint64) FlightComm {
	for _, c := range fr.Comms {
		if c.ID == id {
			return c
		}
	}
	return FlightComm{}
}

func findSeq(fc FlightComm, seq uint64) (FlightOp, bool) {
	for _, ops := range [][]FlightOp{fc.Pending, fc.Recent} {
		for _, op := range ops {
			if op.Seq == seq {
				return op, true
			}
		}
	}
	return FlightOp{}, false
}

func lastCollective(fc FlightComm) (FlightOp, bool) {
	var last FlightOp
	for _, op := range fc.Recent {
		if op.Seq > last.Seq {
			last = op
		}
	}
	return last, last.Seq > 0
}

// describeLast says where a rank that never entered the incident's
// operation was: its last operation on the communicator, and any operation
// it is inside on another one.
func describeLast(last FlightOp, ok bool, head FlightRecord, comm uint64) string {
	var s string
	switch {
	case !ok:
		s = "had entered no collective of it yet"
	case last.State == flightPending.String():
		s = fmt.Sprintf("is inside %s #%d", last.Op, last.Seq)
	case last.State == flightFailed.String():
		s = fmt.Sprintf("last entered %s #%d, which failed", last.Op, last.Seq)
	default:
		s = fmt.Sprintf("last entered %s #%d (done)", last.Op, last.Seq)
	}
	for _, c := range head.Comms {
		if c.ID != comm && len(c.Pending) > 0 {
			p := c.Pending[0]
			s += fmt.Sprintf(" and is inside %s #%d of communicator %#x", p.Op, p.Seq, c.ID)
			break
		}
	}
	return s
}

func rankList(rs []int) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.Itoa(r)
	}
	if len(rs) == 1 {
		return "rank " + s[0]
	}
	return "ranks " + strings.Join(s, ",")
}
