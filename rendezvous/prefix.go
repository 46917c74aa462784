package rendezvous

import (
	"context"
	"errors"
	"strconv"
)

// prefixStore namespaces the keys of an underlying store, like torch's
// PrefixStore: key k becomes prefix + "/" + k.
type prefixStore struct {
	prefix string
	under  Store
	life   context.Context // cancelled (cause ErrStoreClosed) by Close
	stop   context.CancelCauseFunc
}

// NewPrefixStore returns a view of s in which every key k is stored as
// prefix + "/" + k, as torch's PrefixStore does; groups and restarts use it
// to share one store. NumKeys counts every key of s (as in torch). Closing
// the view fails its pending and later calls with ErrStoreClosed but leaves
// s open: s belongs to the caller.
func NewPrefixStore(prefix string, s Store) Store {
	life, stop := context.WithCancelCause(context.Background())
	return &prefixStore{prefix: prefix + "/", under: s, life: life, stop: stop}
}

func (p *prefixStore) key(k string) string { return p.prefix + k }

func (p *prefixStore) keys(ks []string) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = p.key(k)
	}
	return out
}

// bind derives a context that also ends when the view is closed.
func (p *prefixStore) bind(ctx context.Context, op string, keys []string) (context.Context, func(), error) {
	if p.life.Err() != nil {
		return nil, nil, &Error{Op: op, Keys: keys, Err: ErrStoreClosed}
	}
	if p.under == nil {
		return nil, nil, &Error{Op: op, Keys: keys, Err: errors.New("NewPrefixStore was given a nil Store")}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(p.life, func() { cancel(ErrStoreClosed) })
	return ctx, func() { unhook(); cancel(nil) }, nil
}

// result maps an error caused by closing the view to ErrStoreClosed and
// names the caller's keys (and the prefix) in errors of the underlying store.
func (p *prefixStore) result(ctx context.Context, op string, keys []string, err error) error {
	if err == nil {
		return nil
	}
	where := "prefix " + strconv.Quote(p.prefix)
	if errors.Is(context.Cause(ctx), ErrStoreClosed) && !errors.Is(err, ErrStoreClosed) {
		return &Error{Op: op, Keys: keys, Store: where, Err: ErrStoreClosed}
	}
	var e *Error
	if errors.As(err, &e) {
		if e.Store != "" {
			where += " of " + e.Store
		}
		return &Error{Op: e.Op, Keys: keys, Store: where, Err: e.Err}
	}
	return &Error{Op: op, Keys: keys, Store: where, Err: err}
}

func (p *prefixStore) Set(ctx context.Context, key string, value []byte) error {
	ctx, done, err := p.bind(ctx, "set", []string{key})
	if err != nil {
		return err
	}
	defer done()
	return p.result(ctx, "set", []string{key}, p.under.Set(ctx, p.key(key), value))
}

func (p *prefixStore) Get(ctx context.Context, key string) ([]byte, error) {
	ctx, done, err := p.bind(ctx, "get", []string{key})
	if err != nil {
		return nil, err
	}
	defer done()
	v, err := p.under.Get(ctx, p.key(key))
	return v, p.result(ctx, "get", []string{key}, err)
}

func (p *prefixStore) Wait(ctx context.Context, keys ...string) error {
	ctx, done, err := p.bind(ctx, "wait", keys)
	if err != nil {
		return err
	}
	defer done()
	return p.result(ctx, "wait", keys, p.under.Wait(ctx, p.keys(keys)...))
}

func (p *prefixStore) Check(ctx context.Context, keys ...string) (bool, error) {
	ctx, done, err := p.bind(ctx, "check", keys)
	if err != nil {
		return false, err
	}
	defer done()
	ok, err := p.under.Check(ctx, p.keys(keys)...)
	return ok, p.result(ctx, "check", keys, err)
}

func (p *prefixStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	ctx, done, err := p.bind(ctx, "add", []string{key})
	if err != nil {
		return 0, err
	}
	defer done()
	n, err := p.under.Add(ctx, p.key(key), delta)
	return n, p.result(ctx, "add", []string{key}, err)
}

func (p *prefixStore) CompareAndSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	ctx, done, err := p.bind(ctx, "compare-and-set", []string{key})
	if err != nil {
		return nil, err
	}
	defer done()
	v, err := p.under.CompareAndSet(ctx, p.key(key), expected, desired)
	return v, p.result(ctx, "compare-and-set", []string{key}, err)
}

func (p *prefixStore) Delete(ctx context.Context, key string) (bool, error) {
	ctx, done, err := p.bind(ctx, "delete", []string{key})
	if err != nil {
		return false, err
	}
	defer done()
	ok, err := p.under.Delete(ctx, p.key(key))
	return ok, p.result(ctx, "delete", []string{key}, err)
}

func (p *prefixStore) NumKeys(ctx context.Context) (int64, error) {
	ctx, done, err := p.bind(ctx, "num-keys", nil)
	if err != nil {
		return 0, err
	}
	defer done()
	n, err := p.under.NumKeys(ctx)
	return n, p.result(ctx, "num-keys", nil, err)
}

// Close closes the view, not the underlying store.
func (p *prefixStore) Close() error {
	p.stop(ErrStoreClosed)
	return nil
}
