package comm

// Init's join check and progress reports. Before the backend connects,
// every rank records in the store what it believes (world size, job
// identity), so that ranks that disagree fail at once with one message
// naming who said what, and a rank that never starts is told apart from a
// rank that started but cannot be reached.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gocomm/comm/env"
	"github.com/gocomm/comm/rendezvous"
)

const (
	// defaultInitTimeout bounds Init when no timeout was chosen: a rank
	// that never starts should fail the job within minutes, as torchrun's
	// rendezvous join timeout (600 s) does, not after the 30 minutes
	// operations may legitimately wait for one another.
	defaultInitTimeout = 10 * time.Minute
	// firstReport is how long Init waits for ranks before it says so, and
	// reportEvery how often it says so again.
	firstReport = 4 * time.Second
	reportEvery = 10 * time.Second
	// verdictLinger bounds how long a rank that hosts the store keeps it
	// up after a verdict, so that the others can read it.
	verdictLinger = time.Second
	// verdictGather bounds how long the rank that found a disagreement
	// waits for more ranks' records, so that its message names them.
	verdictGather = 500 * time.Millisecond
	// reportListLimit: larger worlds report how many ranks are missing,
	// not which (each listed rank costs a store request per report).
	reportListLimit = 256
)

// The join keys. A rank's record is under joinPrefix+"rank/<r>"; the
// first record set is the claim the others compare theirs with; the
// verdict is "ok" once every rank agreed with the claim, else the message.
const (
	joinPrefix        = "gocomm/join/"
	joinClaimKey      = joinPrefix + "claim"
	joinRegisteredKey = joinPrefix + "registered" // counts records
	joinAgreedKey     = joinPrefix + "agreed"     // counts records agreeing with the claim
	joinVerdictKey    = joinPrefix + "verdict"
	joinSeenKey       = joinPrefix + "seen" // counts ranks that read a failed verdict
	joinOK            = "ok"
)

func joinRankKey(r int) string { return joinPrefix + "rank/" + strconv.Itoa(r) }

// joinUpKey is set by a rank whose connections are all up.
func joinUpKey(r int) string { return joinPrefix + "up/" + strconv.Itoa(r) }

// joinRecord is what a rank believes, as it records it in the store.
type joinRecord struct {
	Rank    int    `json:"rank"`
	Size    int    `json:"size"`
	Job     string `json:"job,omitempty"`
	JobFrom string `json:"job_from,omitempty"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Start   int64  `json:"start"` // tells two processes of one pid apart
}

// agrees reports whether two ranks believe they are in the same world.
func (r joinRecord) agrees(o joinRecord) bool { return r.Size == o.Size && r.Job == o.Job }

// joiner runs one rank's join check.
type joiner struct {
	store rendezvous.Store
	rec   joinRecord
	enc   []byte
	where string // the meeting place, for messages
	file  bool   // the meeting place is a store file, which outlives its job
	etcd  bool   // the meeting place is an etcd prefix, whose keys outlive a crashed job by the lease TTL
}

// verdictError is a join that failed on a verdict, the same on every
// rank: the ranks disagree about the world (it wraps ErrEnvironment), or
// some never registered before the timeout (it wraps
// context.DeadlineExceeded).
type verdictError struct {
	rank, size int
	verdict    string
	timeout    bool
}

func (e *verdictError) Error() string {
	if e.timeout {
		return fmt.Sprintf("comm: rank %d of %d: %s: %v", e.rank, e.size, e.verdict, context.DeadlineExceeded)
	}
	return fmt.Sprintf("comm: rank %d of %d: the ranks disagree about the world: %s", e.rank, e.size, e.verdict)
}

func (e *verdictError) Is(target error) bool {
	if e.timeout {
		return target == context.DeadlineExceeded
	}
	return target == ErrEnvironment
}

func newJoiner(store rendezvous.Store, cfg *config) *joiner {
	host, _ := os.Hostname()
	rec := joinRecord{Rank: cfg.rank, Size: cfg.size, Job: cfg.job, JobFrom: cfg.jobFrom,
		Host: host, PID: os.Getpid(), Start: time.Now().UnixNano()}
	enc, _ := json.Marshal(rec) // plain fields: cannot fail
	return &joiner{store: store, rec: rec, enc: enc, where: cfg.meetingPlace(),
		file: cfg.rdzv.Kind == env.RendezvousFile, etcd: cfg.rdzv.Kind == env.RendezvousEtcd}
}

// meetingPlace names where the ranks meet, for messages.
func (cfg *config) meetingPlace() string {
	if cfg.rdzv.Addr+cfg.rdzv.Path == "" {
		return "store given in Options.Store"
	}
	if cfg.rdzv.Kind == env.RendezvousEtcd {
		return fmt.Sprintf("etcd store at %s, prefix %s", cfg.rdzv.Addr, cfg.rdzv.Prefix)
	}
	return fmt.Sprintf("%v store at %s", cfg.rdzv.Kind, cfg.rdzv.Addr+cfg.rdzv.Path)
}

// join records this rank's beliefs and returns once every rank has
// recorded the same, or fails with the first disagreement any rank found,
// or, when ctx ends, with the ranks that never registered.
func (j *joiner) join(ctx context.Context) error {
	me := j.rec.Rank
	got, err := setOnce(ctx, j.store, joinRankKey(me), j.enc)
	if err != nil {
		return j.storeError(ctx, "registering", err)
	}
	if !bytes.Equal(got, j.enc) {
		return j.fail(ctx, verdictMismatch, j.duplicate(got))
	}
	if _, err := j.store.Add(ctx, joinRegisteredKey, 1); err != nil {
		return j.storeError(ctx, "registering", err)
	}
	first, err := setOnce(ctx, j.store, joinClaimKey, j.enc)
	if err != nil {
		return j.storeError(ctx, "registering", err)
	}
	var claim joinRecord
	if err := json.Unmarshal(first, &claim); err != nil {
		return j.fail(ctx, verdictMismatch, fmt.Sprintf("the %s holds a join record gocomm cannot read (%q): another program uses the same MASTER_ADDR:MASTER_PORT", j.where, truncateBytes(first, 64)))
	}
	if !claim.agrees(j.rec) {
		return j.fail(ctx, verdictMismatch, j.disagreement(ctx, claim))
	}
	n, err := j.store.Add(ctx, joinAgreedKey, 1)
	if err != nil {
		return j.storeError(ctx, "registering", err)
	}
	if n == int64(j.rec.Size) {
		if _, err := setOnce(ctx, j.store, joinVerdictKey, []byte(joinOK)); err != nil {
			return j.storeError(ctx, "registering", err)
		}
	}
	if err := j.store.Wait(ctx, joinVerdictKey); err != nil {
		return j.storeError(ctx, "waiting for the other ranks", err)
	}
	v, err := j.store.Get(ctx, joinVerdictKey)
	if err != nil {
		return j.storeError(ctx, "waiting for the other ranks", err)
	}
	if string(v) == joinOK {
		return nil
	}
	return j.failed(ctx, string(v))
}

// setOnce sets key to value unless it is set, and returns the value it
// holds: the first writer's. It then sets the key again to that same
// value, because a compare-and-set does not wake the ranks waiting for the
// key on every store (torch 1.13's TCPStore server, which torchrun's agent
// hosts, does not), and only a set does.
func setOnce(ctx context.Context, store rendezvous.Store, key string, value []byte) ([]byte, error) {
	got, err := store.CompareAndSet(ctx, key, nil, value)
	if err != nil {
		return nil, err
	}
	if err := store.Set(ctx, key, got); err != nil {
		return nil, err
	}
	return got, nil
}

// Verdicts are stored as a kind, a newline and the message.
const (
	verdictMismatch = "mismatch"
	verdictTimeout  = "timeout"
)

// fail records verdict unless another rank recorded one first, and fails
// with the one recorded.
func (j *joiner) fail(ctx context.Context, kind, verdict string) error {
	v := kind + "\n" + verdict
	got, err := setOnce(ctx, j.store, joinVerdictKey, []byte(v))
	if err == nil && string(got) != joinOK {
		v = string(got)
	}
	return j.failed(ctx, v)
}

// failed is the error of stored verdict v.
func (j *joiner) failed(ctx context.Context, v string) error {
	j.store.Add(ctx, joinSeenKey, 1) // best effort: lets the store's host close sooner
	kind, verdict, _ := strings.Cut(v, "\n")
	if kind == verdictTimeout {
		return &verdictError{rank: j.rec.Rank, size: j.rec.Size, verdict: verdict, timeout: true}
	}
	return &verdictError{rank: j.rec.Rank, size: j.rec.Size, verdict: verdict}
}

// storeError says why the join failed. When the time ran out, the first
// rank to see it records which ranks never registered, as the verdict
// every rank fails with; else it is the store's error.
func (j *joiner) storeError(ctx context.Context, doing string, err error) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The store failed, or the caller cancelled Init: no verdict.
		return fmt.Errorf("comm: rank %d of %d: %s in the %s: %w", j.rec.Rank, j.rec.Size, doing, j.where, err)
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	missing, n := j.unregistered(qctx)
	who := "some ranks"
	if len(missing) > 0 {
		who = rankRanges(missing)
	}
	verdict := fmt.Sprintf("%s never registered in the %s (%d of %d did) before Init's timeout: not started, crashed before Init, or given another MASTER_ADDR:MASTER_PORT or job; their own output says which",
		who, j.where, n, j.rec.Size)
	if qctx.Err() != nil {
		// The store is gone: say what this rank knows.
		return &verdictError{rank: j.rec.Rank, size: j.rec.Size, verdict: "ranks never registered in the " + j.where + " before Init's timeout, and the store is gone: " + err.Error(), timeout: true}
	}
	return j.fail(qctx, verdictTimeout, verdict)
}

// unregistered lists the ranks whose records are missing (nil when the
// world is too large to list) and counts those present.
func (j *joiner) unregistered(ctx context.Context) (missing []int, registered int) {
	size := j.rec.Size
	if size > reportListLimit {
		n, _ := j.store.Add(ctx, joinRegisteredKey, 0)
		return nil, int(n)
	}
	for r := range size {
		ok, err := j.store.Check(ctx, joinRankKey(r))
		if err != nil {
			return nil, registered
		}
		if ok {
			registered++
		} else {
			missing = append(missing, r)
		}
	}
	return missing, registered
}

// records reads the records of ranks [0, n) that are in the store.
func (j *joiner) records(ctx context.Context, n int) []joinRecord {
	var recs []joinRecord
	for r := range min(n, reportListLimit) {
		if ok, err := j.store.Check(ctx, joinRankKey(r)); err != nil || !ok {
			continue
		}
		b, err := j.store.Get(ctx, joinRankKey(r))
		var rec joinRecord
		if err == nil && json.Unmarshal(b, &rec) == nil {
			recs = append(recs, rec)
		}
	}
	return recs
}

// disagreement describes how this rank's record and the claim differ,
// naming every rank registered by then.
func (j *joiner) disagreement(ctx context.Context, claim joinRecord) string {
	// The ranks start together: give the others a moment to register,
	// so that the message names them too.
	gctx, cancel := context.WithTimeout(ctx, verdictGather)
	keys := make([]string, min(j.rec.Size, claim.Size, reportListLimit))
	for r := range keys {
		keys[r] = joinRankKey(r)
	}
	j.store.Wait(gctx, keys...)
	cancel()
	recs := j.records(ctx, max(j.rec.Size, claim.Size))
	if !slices.ContainsFunc(recs, func(r joinRecord) bool { return r.Rank == j.rec.Rank }) {
		recs = append(recs, j.rec)
	}
	if !slices.ContainsFunc(recs, func(r joinRecord) bool { return r.Rank == claim.Rank }) {
		recs = append(recs, claim)
	}
	return describeDisagreement(recs, j.where)
}

// describeDisagreement is the verdict for records that do not all agree:
// each belief and the ranks holding it, smallest group first, and the
// likely causes.
func describeDisagreement(recs []joinRecord, where string) string {
	type belief struct {
		rec   joinRecord
		ranks []int
	}
	var beliefs []*belief
	sizes, jobs := map[int]bool{}, map[string]bool{}
	for _, r := range recs {
		sizes[r.Size], jobs[r.Job] = true, true
		i := slices.IndexFunc(beliefs, func(b *belief) bool { return b.rec.agrees(r) })
		if i < 0 {
			beliefs = append(beliefs, &belief{rec: r})
			i = len(beliefs) - 1
		}
		beliefs[i].ranks = append(beliefs[i].ranks, r.Rank)
	}
	slices.SortStableFunc(beliefs, func(a, b *belief) int {
		if len(a.ranks) != len(b.ranks) {
			return len(a.ranks) - len(b.ranks)
		}
		return slices.Min(a.ranks) - slices.Min(b.ranks)
	})
	var parts []string
	for _, b := range beliefs {
		slices.Sort(b.ranks)
		verb := "says"
		if len(b.ranks) > 1 {
			verb = "say"
		}
		var what []string
		if len(sizes) > 1 {
			what = append(what, fmt.Sprintf("WORLD_SIZE=%d", b.rec.Size))
		}
		if len(jobs) > 1 {
			job := b.rec.Job
			if job == "" {
				what = append(what, "no job id")
			} else {
				what = append(what, fmt.Sprintf("%s=%s", cmp.Or(b.rec.JobFrom, "job"), job))
			}
		}
		parts = append(parts, fmt.Sprintf("%s %s %s", rankRanges(b.ranks), verb, strings.Join(what, " and ")))
	}
	var cause string
	if len(sizes) > 1 {
		cause = fmt.Sprintf("WORLD_SIZE differs between the ranks' launch commands, or two jobs share MASTER_ADDR:MASTER_PORT (the %s): give each job its own port", where)
	} else {
		cause = fmt.Sprintf("two jobs share MASTER_ADDR:MASTER_PORT (the %s): give each job its own port; or the ranks' launcher variables differ", where)
	}
	return fmt.Sprintf("%s. Likely cause: %s (not the network)", strings.Join(parts, ", "), cause)
}

// duplicate is the verdict when another process registered as this rank.
func (j *joiner) duplicate(other []byte) string {
	var o joinRecord
	who := fmt.Sprintf("a process that wrote %q", truncateBytes(other, 64))
	if json.Unmarshal(other, &o) == nil {
		who = fmt.Sprintf("pid %d on %s (WORLD_SIZE=%d)", o.PID, o.Host, o.Size)
	}
	cause := fmt.Sprintf("two jobs share MASTER_ADDR:MASTER_PORT (the %s): give each job its own port; or two processes were given RANK=%d", j.where, j.rec.Rank)
	if j.file {
		cause = fmt.Sprintf("the store file is left from an earlier run, or two jobs share it (the %s): remove it or give each job its own; or two processes were given RANK=%d", j.where, j.rec.Rank)
	}
	if j.etcd {
		cause = fmt.Sprintf("two jobs share the etcd prefix (the %s), or an earlier run under it crashed less than the lease TTL ago: give each job its own prefix; or two processes were given RANK=%d", j.where, j.rec.Rank)
	}
	return fmt.Sprintf("two processes registered as rank %d: %s and pid %d on %s (WORLD_SIZE=%d). Likely cause: %s (not the network)",
		j.rec.Rank, who, j.rec.PID, j.rec.Host, j.rec.Size, cause)
}

// linger keeps the store this rank hosts up after a verdict until every
// registered rank has read it, or verdictLinger passes.
func linger(store rendezvous.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), verdictLinger)
	defer cancel()
	for ctx.Err() == nil {
		seen, err1 := store.Add(ctx, joinSeenKey, 0)
		reg, err2 := store.Add(ctx, joinRegisteredKey, 0)
		if err1 != nil || err2 != nil || seen >= reg {
			return
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// rankRanges names ranks compactly: "rank 3", "ranks 0-2", "ranks 0-2,5".
func rankRanges(rs []int) string {
	if len(rs) == 1 {
		return "rank " + strconv.Itoa(rs[0])
	}
	var b strings.Builder
	for i := 0; i < len(rs); {
		k := i
		for k+1 < len(rs) && rs[k+1] == rs[k]+1 {
			k++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(rs[i]))
		if k > i {
			b.WriteString("-" + strconv.Itoa(rs[k]))
		}
		i = k + 1
	}
	return "ranks " + b.String()
}

// initReport says, while Init waits for ranks, who it waits for: first
// after firstReport, then every reportEvery, until stopped.
type initReport struct {
	rank, size int
	deadline   time.Time
	logger     *slog.Logger // nil: standard error
	where      string

	mu       sync.Mutex // protects following
	joiner   *joiner
	phase    initPhase
	stopping chan struct{}
	done     chan struct{}
}

type initPhase int

const (
	phaseStore   initPhase = iota // opening the store
	phaseJoin                     // the join check
	phaseConnect                  // the backend connects
)

func startInitReport(ctx context.Context, cfg *config, logger *slog.Logger) *initReport {
	deadline, _ := ctx.Deadline()
	p := &initReport{rank: cfg.rank, size: cfg.size, deadline: deadline, logger: logger,
		where: cfg.meetingPlace(), stopping: make(chan struct{}), done: make(chan struct{})}
	go p.run(ctx)
	return p
}

func (p *initReport) run(ctx context.Context) {
	defer close(p.done)
	t := time.NewTimer(firstReport)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.stopping:
			return
		case <-t.C:
		}
		if line := p.line(ctx); line != "" {
			if p.logger != nil {
				p.logger.Info(line)
			} else {
				fmt.Fprintln(os.Stderr, line)
			}
		}
		t.Reset(reportEvery)
	}
}

// enter moves the report to phase; j is the join's state from phaseJoin on.
func (p *initReport) enter(phase initPhase, j *joiner) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.phase, p.joiner = phase, j
	p.mu.Unlock()
}

// stop ends the reports and waits for a report being written.
func (p *initReport) stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	select {
	case <-p.stopping:
	default:
		close(p.stopping)
	}
	p.mu.Unlock()
	<-p.done
}

// line is the progress report of the moment.
func (p *initReport) line(ctx context.Context) string {
	p.mu.Lock()
	phase, j := p.phase, p.joiner
	p.mu.Unlock()
	left := fmt.Sprintf("giving up in %v", time.Until(p.deadline).Round(time.Second))
	head := fmt.Sprintf("comm: rank %d:", p.rank)
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	switch phase {
	case phaseStore:
		return fmt.Sprintf("%s waiting for the %s (its host, rank 0 or the launcher, has not started it yet, or it is not reachable at that address); %s", head, p.where, left)
	case phaseJoin:
		missing, n := j.unregistered(qctx)
		if qctx.Err() != nil {
			return ""
		}
		who := "the others"
		if len(missing) > 0 {
			who = rankRanges(missing)
		}
		return fmt.Sprintf("%s %d/%d ranks joined; waiting for %s (not yet registered in the store); %s", head, n, p.size, who, left)
	default:
		var waiting []int
		for r := range min(p.size, reportListLimit) {
			if r == p.rank {
				continue
			}
			if ok, err := j.store.Check(qctx, joinUpKey(r)); err != nil {
				return ""
			} else if !ok {
				waiting = append(waiting, r)
			}
		}
		who := "the others have connected; this rank has not"
		switch len(waiting) {
		case 0:
		case 1:
			who = rankRanges(waiting) + " has not finished connecting"
		default:
			who = rankRanges(waiting) + " have not finished connecting"
		}
		return fmt.Sprintf("%s %d/%d ranks joined; connecting: %s (every rank registered in the store: if this lasts, check that the ranks' hosts reach each other, GOCOMM_SOCKET_IFNAME); %s", head, p.size, p.size, who, left)
	}
}
