package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Store is the key-value store ranks use to meet: they publish
// data-connection addresses, exchange ids, count arrivals and wait for each
// other. The semantics are those of torch.distributed's Store.
//
// Every implementation is safe for concurrent use. Values passed in are
// copied before the call returns and values returned belong to the caller.
// Blocking calls return promptly when ctx is done (with an error wrapping
// ctx.Err()) or when the store is closed (ErrStoreClosed). Errors are *Error
// values naming the operation, the keys and the store.
type Store interface {
	// Set stores value under key, replacing any earlier value, and wakes
	// every caller waiting for key.
	Set(ctx context.Context, key string, value []byte) error
	// Get returns the value of key, blocking until some rank sets it or
	// ctx is done.
	Get(ctx context.Context, key string) ([]byte, error)
	// Wait blocks until every one of keys exists or ctx is done.
	Wait(ctx context.Context, keys ...string) error
	// Check reports, without blocking, whether every one of keys exists.
	// Check with no keys reports true.
	Check(ctx context.Context, keys ...string) (bool, error)
	// Add atomically adds delta to the counter stored under key and returns
	// the new value. Counters are stored as decimal ASCII (as torch does), so
	// Get returns "3" after Add(key, 3) on a missing key; a missing key or an
	// empty value counts as 0. A value that is not a decimal int64, or a sum
	// that overflows, fails with ErrBadCounter (over TCP the server drops the
	// connection instead, as torch's does, and the error wraps
	// ErrConnectionLost).
	Add(ctx context.Context, key string, delta int64) (int64, error)
	// CompareAndSet has torch's compare_set semantics exactly:
	//   - key missing, expected empty: set desired, return desired;
	//   - key missing, expected not empty: change nothing, return expected;
	//   - key present and equal to expected: set desired, return desired;
	//   - otherwise: change nothing, return the current value.
	CompareAndSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error)
	// Delete removes key and reports whether it existed.
	Delete(ctx context.Context, key string) (bool, error)
	// NumKeys returns the number of keys in the store. For a prefix store
	// (as in torch) it is the number of keys of the underlying store.
	NumKeys(ctx context.Context) (int64, error)
	// Close releases the store's resources and fails pending and later calls
	// with ErrStoreClosed. Closing twice is not an error.
	Close() error
}

// Protocol limits. They bound what a TCP store server accepts from a
// connection (larger requests close that connection) and every store rejects
// larger keys and values with ErrTooLarge.
const (
	// MaxKeyLen is the longest key in bytes, as stored: the TCP client's
	// "/" prefix and a prefix store's prefix count.
	MaxKeyLen = 64 << 10
	// MaxValueLen is the longest value in bytes.
	MaxValueLen = 1 << 30
	// MaxKeys is the largest number of keys in one Wait or Check.
	MaxKeys = 1_000_000
)

// Errors. Match them with errors.Is; they arrive wrapped in *Error.
var (
	// ErrStoreClosed is returned by every Store method called after Close,
	// and by blocking calls that Close interrupted.
	ErrStoreClosed = errors.New("comm: rendezvous store closed")
	// ErrBadCounter is returned by Add when the value stored under the key
	// is not a decimal int64, or when adding delta would overflow int64.
	ErrBadCounter = errors.New("comm: store value is not a usable decimal int64 counter")
	// ErrTooLarge is returned when a key, a value or a key list exceeds
	// MaxKeyLen, MaxValueLen or MaxKeys.
	ErrTooLarge = errors.New("comm: store key, value or key count over the protocol limit")
	// ErrMasterUnreachable is returned by DialTCPStore and NewTCPStore when
	// no TCP store server accepted a connection before ctx was done: rank 0
	// (the master at MASTER_ADDR:MASTER_PORT) is not running yet, has
	// exited, or the address is wrong. NewEtcdStore returns it when no etcd
	// server answered.
	ErrMasterUnreachable = errors.New("comm: rendezvous store master is not reachable")
	// ErrConnectionLost is returned by a TCP store when its connection to
	// the server broke mid-request: the server exited or dropped the
	// connection because it could not serve the request.
	ErrConnectionLost = errors.New("comm: connection to the rendezvous store server lost")
	// ErrProtocol is returned when a TCP store server answered with bytes
	// the client did not expect (not a TCP store server, or an incompatible
	// protocol version).
	ErrProtocol = errors.New("comm: rendezvous store protocol violation")
	// ErrLeaseExpired is returned by every call of an EtcdStore after it
	// found one of its leases gone from etcd: the server went without a
	// renewal for longer than the lease's TTL (this process was paused or
	// cut off from etcd that long), and deleted the keys on it. The store
	// cannot go on; the job's keys, or this rank's, are lost.
	ErrLeaseExpired = errors.New("comm: rendezvous store lease expired")
)

// Error describes a failed store operation. Err holds the cause; match it
// with errors.Is against the sentinels above or context.DeadlineExceeded.
type Error struct {
	Op    string   // "set", "get", "wait", "check", "add", "compare-and-set", "delete", "num-keys", "dial", "listen", "open"
	Keys  []string // the keys the operation was about, as the caller named them
	Store string   // which store: "tcp 10.0.0.1:29500", "file /shared/rdv", "" for in-memory
	Err   error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("rendezvous: ")
	b.WriteString(e.Op)
	switch {
	case len(e.Keys) == 1:
		b.WriteString(" " + strconv.Quote(e.Keys[0]))
	case len(e.Keys) > 1 && len(e.Keys) <= 8:
		for i, k := range e.Keys {
			if i == 0 {
				b.WriteString(" [")
			} else {
				b.WriteString(" ")
			}
			b.WriteString(strconv.Quote(k))
		}
		b.WriteString("]")
	case len(e.Keys) > 8:
		fmt.Fprintf(&b, " [%q ... %d keys]", e.Keys[0], len(e.Keys))
	}
	if e.Store != "" {
		b.WriteString(" on " + e.Store)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// checkKey reports ErrTooLarge for a key longer than MaxKeyLen once stored.
func checkKey(key string) error {
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key of %d bytes (limit %d)", ErrTooLarge, len(key), MaxKeyLen)
	}
	return nil
}

func checkValue(value []byte) error {
	if len(value) > MaxValueLen {
		return fmt.Errorf("%w: value of %d bytes (limit %d)", ErrTooLarge, len(value), MaxValueLen)
	}
	return nil
}

func checkKeys(keys []string) error {
	if len(keys) > MaxKeys {
		return fmt.Errorf("%w: %d keys in one call (limit %d)", ErrTooLarge, len(keys), MaxKeys)
	}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return err
		}
	}
	return nil
}

// waitError is the cause reported when ctx ends a blocking call.
func waitError(ctx context.Context, what string) error {
	return fmt.Errorf("%s before the context ended: %w", what, ctx.Err())
}

// addCounter parses a stored counter and adds delta, as torch does for Add.
// An empty value counts as zero (as in torch's FileStore).
func addCounter(old []byte, delta int64) (int64, []byte, error) {
	var cur int64
	if len(old) > 0 {
		v, err := strconv.ParseInt(string(old), 10, 64)
		if err != nil {
			return 0, nil, fmt.Errorf("%w: stored value %q", ErrBadCounter, truncate(old, 32))
		}
		cur = v
	}
	sum := cur + delta
	if (delta > 0 && sum < cur) || (delta < 0 && sum > cur) {
		return 0, nil, fmt.Errorf("%w: %d + %d overflows int64", ErrBadCounter, cur, delta)
	}
	return sum, strconv.AppendInt(nil, sum, 10), nil
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

// clone returns a copy of b that is never nil, so an empty value stays
// distinguishable from "no value" in callers that care.
func clone(b []byte) []byte {
	out := make([]byte, len(b))
	copy(out, b)
	return out
}
