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
	// connWaiting is key -> the TCP connections whose WAITs registered it,
	// once per registration (see connWaits).
	connWaiting map[string][]*connWaits
}

// waiter is one pending Wait. Like torch's server it counts keys: ready is
// closed once every key that was missing at registration has been set at
// least once, so callers that need "all exist now" check again.
type waiter struct {
	keys      []string // the keys missing at registration
	remaining int
	ready     chan struct{}
}

// connWaits is a TCP server connection's wait state, kept exactly as torch's
// TCPStore server keeps it (TCPStoreMasterDaemon's keysAwaited_ and
// waitingSockets_), so that a client which abandons a wait and goes on
// using its connection sees what torch's server would send it:
//
//   - a WAIT whose keys all exist is answered at once and leaves the state
//     alone;
//   - otherwise every missing key is registered (once per mention) and
//     awaited is set to their number, replacing whatever an earlier,
//     abandoned WAIT left;
//   - setting a key removes its registrations and decrements awaited once
//     per registration; the decrement that reaches zero owes the client a
//     STOP_WAITING, whichever WAIT it was meant for. Below zero the counter
//     wraps, as torch's size_t does, and owes nothing.
//
// A connection that closes, or sends torch 2.x's CANCEL_WAIT, drops all of
// it (clearWaits). The fields are owned by the table's owner.
type connWaits struct {
	awaited uint64
	// stops counts STOP_WAITING answers owed and not yet taken for
	// sending; notify (capacity 1) is poked when it grows.
	stops  int
	notify chan struct{}
}

func newConnWaits() *connWaits { return &connWaits{notify: make(chan struct{}, 1)} }

// takeStops returns the STOP_WAITING answers owed and forgets them.
func (cw *connWaits) takeStops() int {
	n := cw.stops
	cw.stops = 0
	return n
}

func newTable() *table {
	return &table{data: map[string][]byte{}, waiting: map[string][]*waiter{}, connWaiting: map[string][]*connWaits{}}
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

// waitConn registers a connection's WAIT for keys (see connWaits). It
// reports whether every key exists, in which case the WAIT is answered at
// once and nothing is registered.
func (t *table) waitConn(cw *connWaits, keys []string) bool {
	if t.check(keys) {
		return true
	}
	var n uint64
	for _, k := range keys {
		if _, ok := t.data[k]; !ok {
			t.connWaiting[k] = append(t.connWaiting[k], cw)
			n++
		}
	}
	cw.awaited = n
	return false
}

// clearWaits drops every registration of cw and its count (torch's
// clearSocketWaitState). STOP_WAITING answers already owed stay owed.
func (t *table) clearWaits(cw *connWaits) {
	for k, cws := range t.connWaiting {
		kept := cws[:0]
		for _, x := range cws {
			if x != cw {
				kept = append(kept, x)
			}
		}
		if len(kept) == 0 {
			delete(t.connWaiting, k)
		} else {
			t.connWaiting[k] = kept
		}
	}
	cw.awaited = 0
}

func (t *table) wake(key string) {
	if cws, ok := t.connWaiting[key]; ok {
		delete(t.connWaiting, key)
		for _, cw := range cws {
			cw.awaited--
			if cw.awaited == 0 {
				cw.stops++
				select {
				case cw.notify <- struct{}{}:
				default:
				}
			}
		}
	}
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
