package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Defaults of the etcd store.
const (
	// DefaultEtcdLeaseTTL is how long the keys of a job, or of one rank,
	// outlive the last client that kept their lease alive.
	DefaultEtcdLeaseTTL = 10 * time.Second
	// DefaultEtcdConnectTimeout bounds how long NewEtcdStore waits for an
	// etcd server to answer.
	DefaultEtcdConnectTimeout = 20 * time.Second
)

// etcdTxnOps is how many keys one transaction reads; etcd's default
// --max-txn-ops is 128.
const etcdTxnOps = 100

// EtcdStore is a Store kept in an etcd cluster, so that no rank hosts the
// meeting place and the loss of any rank, rank 0 included, leaves it
// standing. Every rank is a client; each key k is stored under
// prefix + "/" + k, and the prefix must name the job (two jobs with one
// prefix read each other's keys).
//
// Keys live on leases, which etcd deletes with their keys when no client
// has renewed them for the lease's TTL:
//
//   - every key written by Set, Add and CompareAndSet is on the job's
//     lease, which every client of the prefix keeps alive: counters,
//     verdicts and addresses stay as long as any rank of the job lives,
//     whichever rank wrote them, and vanish TTL after the last one died,
//     so a crashed job leaves nothing behind for long;
//   - a key written by SetLeased is on this client's own lease: it
//     vanishes TTL after this client stopped renewing it (its process
//     died or hangs), and at once when it calls Close. Per-rank liveness
//     keys are written so.
//
// Waits watch the prefix (no polling) and survive a restart of the etcd
// server: the client reconnects and resumes the watch where it stopped.
// Values are limited by the server's --max-request-bytes (1.5 MiB by
// default); a larger one fails with ErrTooLarge. If a lease is found gone
// (the server was unreachable for longer than its TTL while it ran), the
// store fails every later call with ErrLeaseExpired: its keys are gone.
//
// The zero value is not usable; call NewEtcdStore.
type EtcdStore struct {
	cli      *clientv3.Client
	prefix   string // the caller's prefix and "/": where keys live
	leaseKey string // where the job lease's id lives, outside the keys
	where    string // "etcd host:port/prefix", for errors
	ttl      time.Duration
	job, own clientv3.LeaseID

	// life ends, with ErrStoreClosed or ErrLeaseExpired as its cause,
	// when the store closes or loses a lease.
	life    context.Context
	stop    context.CancelCauseFunc
	keepers sync.WaitGroup // the lease keepers, ended by stop

	closed    atomic.Bool // set by Close: later calls fail with ErrStoreClosed whatever ended life
	closeOnce sync.Once
	closeErr  error
}

var _ Store = (*EtcdStore)(nil)

// EtcdOption configures NewEtcdStore.
type EtcdOption func(*etcdOptions)

type etcdOptions struct {
	ttl     time.Duration
	connect time.Duration
}

// WithLeaseTTL sets the TTL of the store's leases (DefaultEtcdLeaseTTL if
// not given): how long the job's keys outlive its last rank, and a rank's
// leased keys (SetLeased) outlive it. etcd counts in whole seconds
// (rounded up here) and raises a TTL below its minimum (1.5 election
// timeouts, 2 s by default). The job's lease keeps the TTL of the rank
// that granted it (the first to open the prefix): give every rank the
// same.
func WithLeaseTTL(d time.Duration) EtcdOption { return func(o *etcdOptions) { o.ttl = d } }

// WithConnectTimeout bounds how long NewEtcdStore waits for an etcd
// server to answer (DefaultEtcdConnectTimeout if not given; ctx may end it
// sooner).
func WithConnectTimeout(d time.Duration) EtcdOption {
	return func(o *etcdOptions) { o.connect = d }
}

// NewEtcdStore connects to the etcd cluster at endpoints ("host:port" or
// "http://host:port") and returns the store of the job named by prefix
// (for example "/gocomm/job-42"). Every rank of the job passes the same
// endpoints and prefix. It fails with ErrMasterUnreachable when no
// endpoint answered within the connect timeout or before ctx was done.
func NewEtcdStore(ctx context.Context, endpoints []string, prefix string, opts ...EtcdOption) (*EtcdStore, error) {
	o := etcdOptions{ttl: DefaultEtcdLeaseTTL, connect: DefaultEtcdConnectTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	prefix = strings.TrimRight(prefix, "/")
	where := "etcd " + strings.Join(endpoints, ",") + prefix
	fail := func(err error) error { return &Error{Op: "dial", Store: where, Err: err} }
	switch {
	case len(endpoints) == 0:
		return nil, fail(errors.New("no etcd endpoints given: want host:port of at least one etcd server"))
	case prefix == "":
		return nil, fail(errors.New("empty key prefix: give each job its own prefix, such as /gocomm/<job id>"))
	case o.ttl <= 0 || o.ttl > 24*time.Hour:
		return nil, fail(fmt.Errorf("lease TTL %v: want a duration from 1s to 24h", o.ttl))
	case o.connect <= 0:
		return nil, fail(fmt.Errorf("connect timeout %v: want a positive duration", o.connect))
	}
	for _, e := range endpoints {
		if strings.TrimSpace(e) == "" {
			return nil, fail(fmt.Errorf("empty endpoint in %q", endpoints))
		}
	}
	life, stop := context.WithCancelCause(context.Background())
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: slices.Clone(endpoints),
		Logger:    zap.NewNop(),
		// Notice a connection to a server that was cut off within
		// seconds, not the system's TCP timeouts; no more often than
		// etcd's --grpc-keepalive-min-time (5 s) allows, or it hangs up.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
	})
	if err != nil {
		stop(ErrStoreClosed)
		return nil, fail(err)
	}
	s := &EtcdStore{
		cli:      cli,
		prefix:   prefix + "/",
		leaseKey: prefix + ".lease",
		where:    where,
		ttl:      time.Duration(math.Ceil(o.ttl.Seconds())) * time.Second,
		life:     life,
		stop:     stop,
	}
	cctx, cancel := context.WithTimeout(ctx, o.connect)
	defer cancel()
	if err := s.openLeases(cctx); err != nil {
		stop(ErrStoreClosed)
		cli.Close()
		if ctx.Err() == nil && cctx.Err() != nil {
			err = fmt.Errorf("%w: no etcd server answered at %s within %v (is etcd running there and reachable from this host?)", ErrMasterUnreachable, strings.Join(endpoints, ","), o.connect)
		} else if ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", ErrMasterUnreachable, waitError(ctx, "no etcd server answered"))
		}
		return nil, fail(err)
	}
	s.keepers.Add(2)
	go s.keep(s.job, "job")
	go s.keep(s.own, "rank")
	return s, nil
}

// openLeases grants this client's own lease and joins the job's lease,
// granting it if the job has none (or has one that expired).
func (s *EtcdStore) openLeases(ctx context.Context) error {
	ttl := int64(s.ttl / time.Second)
	own, err := s.cli.Grant(ctx, ttl)
	if err != nil {
		return err
	}
	s.own = own.ID
	for {
		got, err := s.cli.Get(ctx, s.leaseKey)
		if err != nil {
			return err
		}
		if len(got.Kvs) > 0 {
			kv := got.Kvs[0]
			id, perr := strconv.ParseInt(string(kv.Value), 16, 64)
			if perr == nil {
				_, err := s.cli.KeepAliveOnce(ctx, clientv3.LeaseID(id))
				if err == nil {
					s.job = clientv3.LeaseID(id)
					return nil
				}
				if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
					return err
				}
			}
			// Unreadable or expired between the read and the renewal:
			// remove this record (unless replaced) and start a new lease.
			if _, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(s.leaseKey), "=", kv.ModRevision)).
				Then(clientv3.OpDelete(s.leaseKey)).Commit(); err != nil {
				return err
			}
			continue
		}
		job, err := s.cli.Grant(ctx, ttl)
		if err != nil {
			return err
		}
		put, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(s.leaseKey), "=", 0)).
			Then(clientv3.OpPut(s.leaseKey, strconv.FormatInt(int64(job.ID), 16), clientv3.WithLease(job.ID))).Commit()
		if err != nil {
			return err
		}
		if put.Succeeded {
			s.job = job.ID
			return nil
		}
		s.cli.Revoke(ctx, job.ID) // another rank won; use its lease
	}
}

// keep renews lease id until the store closes. When the client's renewals
// stop (the lease expired, or the server was unreachable for longer than
// its TTL, as across a restart, which leases survive), it asks the server
// whether the lease still exists: if it does, it renews it again; if not,
// the store has lost its keys and fails with ErrLeaseExpired.
func (s *EtcdStore) keep(id clientv3.LeaseID, which string) {
	defer s.keepers.Done()
	for s.life.Err() == nil {
		if ch, err := s.cli.KeepAlive(s.life, id); err == nil {
			for range ch {
			}
		}
		if s.life.Err() != nil {
			return
		}
		ctx, cancel := context.WithTimeout(s.life, s.ttl)
		_, err := s.cli.KeepAliveOnce(ctx, id)
		cancel()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.stop(fmt.Errorf("%w: the %s lease (TTL %v) expired, and the keys on it with it", ErrLeaseExpired, which, s.ttl))
			return
		}
		if err != nil {
			select {
			case <-s.life.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

func (s *EtcdStore) fail(op string, keys []string, err error) error {
	return &Error{Op: op, Keys: keys, Store: s.where, Err: err}
}

// begin derives the context of one call: it also ends when the store
// closes or loses a lease.
func (s *EtcdStore) begin(ctx context.Context, op string, keys []string) (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return nil, nil, s.fail(op, keys, ErrStoreClosed)
	}
	if cause := context.Cause(s.life); cause != nil {
		return nil, nil, s.fail(op, keys, cause)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(s.life, func() { cancel(context.Cause(s.life)) })
	return cctx, func() { unhook(); cancel(nil) }, nil
}

// result turns the error of a call that ran in cctx (from begin, on the
// caller's ctx) into the store's *Error.
func (s *EtcdStore) result(ctx, cctx context.Context, op string, keys []string, err error, what string) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	switch cause := context.Cause(s.life); {
	case cause != nil && cctx.Err() != nil:
		err = cause
	case ctx.Err() != nil:
		err = waitError(ctx, what)
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		lost := fmt.Errorf("%w: the job's lease is gone from etcd, and the keys on it with it", ErrLeaseExpired)
		s.stop(lost)
		err = lost
	case errors.Is(err, rpctypes.ErrRequestTooLarge) || status.Code(err) == codes.ResourceExhausted:
		err = fmt.Errorf("%w: %v", ErrTooLarge, err)
	}
	return s.fail(op, keys, err)
}

func (s *EtcdStore) key(k string) string { return s.prefix + k }

func (s *EtcdStore) checkKeys(keys []string) error {
	if len(keys) > MaxKeys {
		return checkKeys(keys)
	}
	for _, k := range keys {
		if err := checkKey(s.key(k)); err != nil {
			return err
		}
	}
	return nil
}

// Set implements Store. The key is on the job's lease.
func (s *EtcdStore) Set(ctx context.Context, key string, value []byte) error {
	return s.set(ctx, "set", key, value, s.job)
}

// SetLeased is Set for a key that belongs to this rank: it is on this
// client's own lease, so it vanishes when the client closes, and TTL after
// its process died or stopped renewing. Another rank's Set, Add or
// CompareAndSet of the key moves it to the job's lease.
func (s *EtcdStore) SetLeased(ctx context.Context, key string, value []byte) error {
	return s.set(ctx, "set", key, value, s.own)
}

func (s *EtcdStore) set(ctx context.Context, op, key string, value []byte, lease clientv3.LeaseID) error {
	keys := []string{key}
	if err := checkKey(s.key(key)); err != nil {
		return s.fail(op, keys, err)
	}
	if err := checkValue(value); err != nil {
		return s.fail(op, keys, err)
	}
	cctx, done, err := s.begin(ctx, op, keys)
	if err != nil {
		return err
	}
	defer done()
	_, err = s.cli.Put(cctx, s.key(key), string(value), clientv3.WithLease(lease))
	return s.result(ctx, cctx, op, keys, err, "not set")
}

// Get implements Store.
func (s *EtcdStore) Get(ctx context.Context, key string) ([]byte, error) {
	keys := []string{key}
	if err := checkKey(s.key(key)); err != nil {
		return nil, s.fail("get", keys, err)
	}
	cctx, done, err := s.begin(ctx, "get", keys)
	if err != nil {
		return nil, err
	}
	defer done()
	for {
		resp, err := s.cli.Get(cctx, s.key(key))
		if err != nil {
			return nil, s.result(ctx, cctx, "get", keys, err, "key not set")
		}
		if len(resp.Kvs) > 0 {
			return clone(resp.Kvs[0].Value), nil
		}
		// Wait, then read again: the key may be deleted in between.
		if err := s.wait(cctx, []string{s.key(key)}); err != nil {
			return nil, s.result(ctx, cctx, "get", keys, err, "key not set")
		}
	}
}

// Wait implements Store.
func (s *EtcdStore) Wait(ctx context.Context, keys ...string) error {
	if err := s.checkKeys(keys); err != nil {
		return s.fail("wait", keys, err)
	}
	cctx, done, err := s.begin(ctx, "wait", keys)
	if err != nil {
		return err
	}
	defer done()
	stored := make([]string, len(keys))
	for i, k := range keys {
		stored[i] = s.key(k)
	}
	return s.result(ctx, cctx, "wait", keys, s.wait(cctx, stored), "keys not set")
}

// wait blocks until every stored key exists: it reads which are missing
// at one revision, then watches the prefix from the next one, applying
// every event in order, until none is missing.
func (s *EtcdStore) wait(ctx context.Context, stored []string) error {
	for {
		rev, missing, err := s.missing(ctx, stored)
		if err != nil || len(missing) == 0 {
			return err
		}
		wctx, cancel := context.WithCancel(ctx)
		events := s.cli.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		err = s.watchFor(ctx, events, missing)
		cancel()
		if !errors.Is(err, errWatchAgain) {
			return err
		}
	}
}

// errWatchAgain: the watch ended (compaction, a canceled watch) before the
// keys appeared; read them again and start a new one.
var errWatchAgain = errors.New("watch ended")

func (s *EtcdStore) watchFor(ctx context.Context, events clientv3.WatchChan, missing map[string]bool) error {
	for resp := range events {
		if err := resp.Err(); err != nil {
			if resp.CompactRevision != 0 || resp.Canceled {
				return errWatchAgain
			}
			return err
		}
		for _, ev := range resp.Events {
			k := string(ev.Kv.Key)
			if _, ours := missing[k]; ours {
				missing[k] = ev.Type == clientv3.EventTypeDelete
			}
		}
		if !anyTrue(missing) {
			return nil
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errWatchAgain
}

func anyTrue(m map[string]bool) bool {
	for _, v := range m {
		if v {
			return true
		}
	}
	return false
}

// missing reads, at one revision, which of the stored keys do not exist,
// and returns that revision and a map holding every stored key, true for
// the missing ones.
func (s *EtcdStore) missing(ctx context.Context, stored []string) (int64, map[string]bool, error) {
	state := make(map[string]bool, len(stored))
	var rev int64
	anyMissing := false
	for i := 0; i < len(stored); i += etcdTxnOps {
		batch := stored[i:min(i+etcdTxnOps, len(stored))]
		ops := make([]clientv3.Op, len(batch))
		opts := []clientv3.OpOption{clientv3.WithCountOnly()}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		for j, k := range batch {
			ops[j] = clientv3.OpGet(k, opts...)
		}
		resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return 0, nil, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for j, r := range resp.Responses {
			gone := r.GetResponseRange().GetCount() == 0
			state[batch[j]] = state[batch[j]] || gone
			anyMissing = anyMissing || gone
		}
	}
	if !anyMissing {
		return rev, nil, nil
	}
	return rev, state, nil
}

// Check implements Store.
func (s *EtcdStore) Check(ctx context.Context, keys ...string) (bool, error) {
	if err := s.checkKeys(keys); err != nil {
		return false, s.fail("check", keys, err)
	}
	cctx, done, err := s.begin(ctx, "check", keys)
	if err != nil {
		return false, err
	}
	defer done()
	stored := make([]string, len(keys))
	for i, k := range keys {
		stored[i] = s.key(k)
	}
	_, missing, err := s.missing(cctx, stored)
	if err != nil {
		return false, s.result(ctx, cctx, "check", keys, err, "not checked")
	}
	return len(missing) == 0, nil
}

// Add implements Store: a transaction that writes the sum only if the
// counter did not change since it was read, retried until one does. The
// key is on the job's lease.
func (s *EtcdStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	keys := []string{key}
	k := s.key(key)
	if err := checkKey(k); err != nil {
		return 0, s.fail("add", keys, err)
	}
	cctx, done, err := s.begin(ctx, "add", keys)
	if err != nil {
		return 0, err
	}
	defer done()
	got, err := s.cli.Get(cctx, k)
	if err != nil {
		return 0, s.result(ctx, cctx, "add", keys, err, "not added")
	}
	kvs := got.Kvs
	for {
		var old []byte
		var mod int64
		if len(kvs) > 0 {
			old, mod = kvs[0].Value, kvs[0].ModRevision
		}
		n, sum, err := addCounter(old, delta)
		if err != nil {
			return 0, s.fail("add", keys, err)
		}
		resp, err := s.cli.Txn(cctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", mod)).
			Then(clientv3.OpPut(k, string(sum), clientv3.WithLease(s.job))).
			Else(clientv3.OpGet(k)).Commit()
		if err != nil {
			return 0, s.result(ctx, cctx, "add", keys, err, "not added")
		}
		if resp.Succeeded {
			return n, nil
		}
		kvs = resp.Responses[0].GetResponseRange().GetKvs()
	}
}

// CompareAndSet implements Store, in one transaction (two when the key
// holds an empty value and expected is empty). The key is on the job's
// lease.
func (s *EtcdStore) CompareAndSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	const op = "compare-and-set"
	keys := []string{key}
	k := s.key(key)
	if err := checkKey(k); err != nil {
		return nil, s.fail(op, keys, err)
	}
	if err := checkValue(desired); err != nil {
		return nil, s.fail(op, keys, err)
	}
	cctx, done, err := s.begin(ctx, op, keys)
	if err != nil {
		return nil, err
	}
	defer done()
	cond := clientv3.Compare(clientv3.Value(k), "=", string(expected))
	if len(expected) == 0 {
		cond = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
	}
	for {
		resp, err := s.cli.Txn(cctx).If(cond).
			Then(clientv3.OpPut(k, string(desired), clientv3.WithLease(s.job))).
			Else(clientv3.OpGet(k)).Commit()
		if err != nil {
			return nil, s.result(ctx, cctx, op, keys, err, "not compared")
		}
		if resp.Succeeded {
			return clone(desired), nil
		}
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		switch {
		case len(kvs) == 0 && len(expected) == 0:
			// Deleted since the comparison: compare again.
			cond = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
		case len(kvs) == 0:
			return clone(expected), nil
		case len(expected) == 0 && len(kvs[0].Value) == 0:
			// Present and empty equals an empty expected value: set it
			// unless it changed meanwhile.
			cond = clientv3.Compare(clientv3.ModRevision(k), "=", kvs[0].ModRevision)
		default:
			return clone(kvs[0].Value), nil
		}
	}
}

// Delete implements Store.
func (s *EtcdStore) Delete(ctx context.Context, key string) (bool, error) {
	keys := []string{key}
	if err := checkKey(s.key(key)); err != nil {
		return false, s.fail("delete", keys, err)
	}
	cctx, done, err := s.begin(ctx, "delete", keys)
	if err != nil {
		return false, err
	}
	defer done()
	resp, err := s.cli.Delete(cctx, s.key(key))
	if err != nil {
		return false, s.result(ctx, cctx, "delete", keys, err, "not deleted")
	}
	return resp.Deleted > 0, nil
}

// NumKeys implements Store: the number of keys under the prefix.
func (s *EtcdStore) NumKeys(ctx context.Context) (int64, error) {
	cctx, done, err := s.begin(ctx, "num-keys", nil)
	if err != nil {
		return 0, err
	}
	defer done()
	resp, err := s.cli.Get(cctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, s.result(ctx, cctx, "num-keys", nil, err, "not counted")
	}
	return resp.Count, nil
}

// RemoveAll deletes every key of the job (everything under the prefix)
// and its lease, for the last rank of a job to leave: other ranks' calls
// fail with ErrLeaseExpired after it. Close the store after.
func (s *EtcdStore) RemoveAll(ctx context.Context) error {
	cctx, done, err := s.begin(ctx, "remove-all", nil)
	if err != nil {
		return err
	}
	defer done()
	if _, err := s.cli.Revoke(cctx, s.job); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return s.result(ctx, cctx, "remove-all", nil, err, "not removed")
	}
	_, err = s.cli.Delete(cctx, s.prefix, clientv3.WithPrefix())
	return s.result(ctx, cctx, "remove-all", nil, err, "not removed")
}

// Close implements Store: it stops renewing the leases, revokes this
// client's own (its SetLeased keys vanish) and closes the connection. The
// job's keys stay for the other ranks.
func (s *EtcdStore) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.stop(ErrStoreClosed)
		s.keepers.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.cli.Revoke(ctx, s.own)
		cancel()
		if err := s.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			s.closeErr = s.fail("close", nil, err)
		}
	})
	return s.closeErr
}

// TTL is the lease TTL in force (rounded up to whole seconds).
func (s *EtcdStore) TTL() time.Duration { return s.ttl }
