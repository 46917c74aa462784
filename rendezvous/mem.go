package rendezvous

import (
	"context"
	"sync"
)

// MemStore is an in-process Store (torch's HashStore) for threads of one
// process and for tests. The zero value is not usable; call NewMemStore.
type MemStore struct {
	done chan struct{} // closed by Close

	mu     sync.Mutex // protects following
	t      *table
	closed bool
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty in-memory store.
func NewMemStore() *MemStore {
	return &MemStore{done: make(chan struct{}), t: newTable()}
}

func (m *MemStore) fail(op string, keys []string, err error) error {
	return &Error{Op: op, Keys: keys, Err: err}
}

// lock takes m.mu unless the store is closed; on success the caller unlocks.
func (m *MemStore) lock(op string, keys ...string) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return m.fail(op, keys, ErrStoreClosed)
	}
	return nil
}

// Set implements Store.
func (m *MemStore) Set(ctx context.Context, key string, value []byte) error {
	if err := checkKey(key); err != nil {
		return m.fail("set", []string{key}, err)
	}
	if err := checkValue(value); err != nil {
		return m.fail("set", []string{key}, err)
	}
	if err := m.lock("set", key); err != nil {
		return err
	}
	defer m.mu.Unlock()
	m.t.set(key, clone(value))
	return nil
}

// Get implements Store.
func (m *MemStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, m.fail("get", []string{key}, err)
	}
	for {
		if err := m.lock("get", key); err != nil {
			return nil, err
		}
		if v, ok := m.t.get(key); ok {
			m.mu.Unlock()
			return clone(v), nil
		}
		w := m.t.watch([]string{key})
		m.mu.Unlock()
		if err := m.await(ctx, w); err != nil {
			return nil, m.fail("get", []string{key}, err)
		}
	}
}

// Wait implements Store.
func (m *MemStore) Wait(ctx context.Context, keys ...string) error {
	if err := checkKeys(keys); err != nil {
		return m.fail("wait", keys, err)
	}
	for {
		if err := m.lock("wait", keys...); err != nil {
			return err
		}
		w := m.t.watch(keys)
		m.mu.Unlock()
		if w == nil {
			return nil
		}
		if err := m.await(ctx, w); err != nil {
			return m.fail("wait", keys, err)
		}
	}
}

// await blocks until w fires, ctx is done or the store closes; in the last
// two cases it unregisters w.
func (m *MemStore) await(ctx context.Context, w *waiter) error {
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	case <-m.done:
	}
	m.mu.Lock()
	m.t.unwatch(w)
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return ErrStoreClosed
	}
	return waitError(ctx, "keys not set")
}

// Check implements Store.
func (m *MemStore) Check(ctx context.Context, keys ...string) (bool, error) {
	if err := checkKeys(keys); err != nil {
		return false, m.fail("check", keys, err)
	}
	if err := m.lock("check", keys...); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	return m.t.check(keys), nil
}

// Add implements Store.
func (m *MemStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := checkKey(key); err != nil {
		return 0, m.fail("add", []string{key}, err)
	}
	if err := m.lock("add", key); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	n, err := m.t.add(key, delta)
	if err != nil {
		return 0, m.fail("add", []string{key}, err)
	}
	return n, nil
}

// CompareAndSet implements Store.
func (m *MemStore) CompareAndSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, m.fail("compare-and-set", []string{key}, err)
	}
	if err := checkValue(desired); err != nil {
		return nil, m.fail("compare-and-set", []string{key}, err)
	}
	if err := m.lock("compare-and-set", key); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	return clone(m.t.compareSet(key, expected, clone(desired))), nil
}

// Delete implements Store.
func (m *MemStore) Delete(ctx context.Context, key string) (bool, error) {
	if err := m.lock("delete", key); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	return m.t.remove(key), nil
}

// NumKeys implements Store.
func (m *MemStore) NumKeys(ctx context.Context) (int64, error) {
	if err := m.lock("num-keys"); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	return m.t.numKeys(), nil
}

// Close implements Store. Blocked Get and Wait calls return ErrStoreClosed.
func (m *MemStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		close(m.done)
	}
	return nil
}
