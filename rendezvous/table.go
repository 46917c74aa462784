package rendezvous

import "bytes"

// table is the key-value state shared by MemStore and TCPStoreServer: the
// data plus the registry of waiters. It does no I/O and no locking; its
// owner serialises access. Stored values are never modified in place (Append
// builds a new slice), so a value read under the owner's lock may be used
// after the lock is released.
type table struct {
	data    map[string][]byte
	waiting map[string][]*waiter // key -> waiters still missing it
}

// waiter is one pending Wait. Like torch's server it counts keys: ready is
// closed once every key that was missing at registration has been set at
// least once, so callers that need "all exist now" check again.
type waiter struct {
	keys      []string // the keys missing at registration
	remaining int
	ready     chan struct{}
}

func newTable() *table {
	return &table{data: map[string][]byte{}, waiting: map[string][]*waiter{}}
}

func (t *table) get(key string) ([]byte, bool) {
	v, ok := t.data[key]
	return v, ok
}

// set stores value, which the table owns from now on, and wakes waiters.
func (t *table) set(key string, value []byte) {
	if value == nil {
		value = []byte{}
	}
	t.data[key] = value
	t.wake(key)
}

func (t *table) add(key string, delta int64) (int64, error) {
	sum, text, err := addCounter(t.data[key], delta)
	if err != nil {
		return 0, err
	}
	t.set(key, text)
	return sum, nil
}

// compareSet implements torch's compare_set; see Store.CompareAndSet. The
// table owns desired if it is stored.
func (t *table) compareSet(key string, expected, desired []byte) []byte {
	cur, ok := t.data[key]
	switch {
	case !ok && len(expected) == 0:
		t.set(key, desired)
		return desired
	case !ok:
		return expected
	case bytes.Equal(cur, expected):
		t.set(key, desired)
		return desired
	default:
		return cur
	}
}

// appendTo appends value to key's value (creating it), torch's APPEND.
func (t *table) appendTo(key string, value []byte) {
	old := t.data[key]
	next := make([]byte, 0, len(old)+len(value))
	next = append(append(next, old...), value...)
	t.set(key, next)
}

func (t *table) remove(key string) bool {
	_, ok := t.data[key]
	delete(t.data, key)
	return ok
}

func (t *table) numKeys() int64 { return int64(len(t.data)) }

func (t *table) check(keys []string) bool {
	for _, k := range keys {
		if _, ok := t.data[k]; !ok {
			return false
		}
	}
	return true
}

// watch registers a waiter for the keys of keys that are missing. It
// returns nil when none is missing.
func (t *table) watch(keys []string) *waiter {
	var w *waiter
	for _, k := range keys {
		if _, ok := t.data[k]; ok {
			continue
		}
		if w == nil {
			w = &waiter{ready: make(chan struct{})}
		}
		if containsString(w.keys, k) {
			continue // a key listed twice is awaited once
		}
		w.keys = append(w.keys, k)
		w.remaining++
		t.waiting[k] = append(t.waiting[k], w)
	}
	return w
}

// unwatch removes w from the registry; it is a no-op for a waiter that has
// already fired.
func (t *table) unwatch(w *waiter) {
	if w == nil {
		return
	}
	for _, k := range w.keys {
		ws := t.waiting[k]
		for i, x := range ws {
			if x == w {
				ws = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(t.waiting, k)
		} else {
			t.waiting[k] = ws
		}
	}
}

func (t *table) wake(key string) {
	ws, ok := t.waiting[key]
	if !ok {
		return
	}
	delete(t.waiting, key)
	for _, w := range ws {
		w.remaining--
		if w.remaining == 0 {
			close(w.ready)
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
