package rendezvous

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// filePollInterval is how often a blocked Get or Wait re-reads the log.
// Like torch we poll rather than use inotify, which does not work on many
// shared file systems (NFS).
const filePollInterval = 10 * time.Millisecond

// FileStore is a Store kept in a file on a file system every rank can reach
// (a local disk for one host, NFS or Lustre for many). The file is an
// append-only log in torch's FileStore format (see the package doc), so a
// gocomm rank and a torch rank can share one: writers append under an
// exclusive flock(2), readers replay what they have not seen under a shared
// one and poll every 10 ms while blocked.
//
// Unlike torch's, Delete appends a tombstone only when the key exists and
// reports whether it did, and NumKeys counts only keys set through the store
// API (not torch's "cleanup/" counter). The file is never removed by the
// store; remove it between jobs, because a stale log from an earlier run
// would answer this run's Gets.
type FileStore struct {
	path   string
	sem    chan struct{} // one file operation at a time in this process; holds the following
	cache  map[string][]byte
	pos    int64 // bytes of the log already replayed into cache
	closed atomic.Bool
	done   chan struct{} // closed by Close
}

var _ Store = (*FileStore)(nil)

// NewFileStore opens (creating it if needed) the store log at path. Every
// rank passes the same path.
func NewFileStore(path string) (*FileStore, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, &Error{Op: "open", Store: "file " + path, Err: fmt.Errorf("cannot create or open the store file (does the directory exist and is it writable by every rank?): %w", err)}
	}
	if err := f.Close(); err != nil {
		return nil, &Error{Op: "open", Store: "file " + path, Err: err}
	}
	return &FileStore{
		path:  path,
		sem:   make(chan struct{}, 1),
		cache: map[string][]byte{},
		done:  make(chan struct{}),
	}, nil
}

func (s *FileStore) fail(op string, keys []string, err error) error {
	return &Error{Op: op, Keys: keys, Store: "file " + s.path, Err: err}
}

// do runs fn with the log open and flocked (exclusively or shared), after
// taking this process's turn. It honours ctx and Close while waiting.
func (s *FileStore) do(ctx context.Context, exclusive bool, fn func(f *os.File) error) error {
	if s.closed.Load() {
		return ErrStoreClosed
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return waitError(ctx, "store file busy in this process")
	case <-s.done:
		return ErrStoreClosed
	}
	defer func() { <-s.sem }()
	if s.closed.Load() {
		return ErrStoreClosed
	}
	f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close() // also releases the flock
	if err := lockFile(ctx, s.done, f, exclusive); err != nil {
		return err
	}
	return fn(f)
}

// refresh replays the part of the log not yet seen. A log shorter than what
// was replayed was truncated or recreated: start over.
func (s *FileStore) refresh(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if size < s.pos {
		s.cache = map[string][]byte{}
		s.pos = 0
	}
	if size == s.pos {
		return nil
	}
	buf := make([]byte, size-s.pos)
	if _, err := f.ReadAt(buf, s.pos); err != nil && err != io.EOF {
		return err
	}
	recs, n := decodeLog(buf)
	applyLog(s.cache, recs)
	s.pos += int64(n)
	return nil
}

func appendRecord(f *os.File, key string, value []byte) error {
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return err
	}
	_, err := f.Write(appendLogRecord(make([]byte, 0, 8+len(key)+len(value)), key, value))
	return err
}

// Set implements Store.
func (s *FileStore) Set(ctx context.Context, key string, value []byte) error {
	if err := checkKey(fileKeyPrefix + key); err != nil {
		return s.fail("set", []string{key}, err)
	}
	if err := checkValue(value); err != nil {
		return s.fail("set", []string{key}, err)
	}
	err := s.do(ctx, true, func(f *os.File) error {
		return appendRecord(f, fileKeyPrefix+key, value)
	})
	if err != nil {
		return s.fail("set", []string{key}, err)
	}
	return nil
}

// Get implements Store.
func (s *FileStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(fileKeyPrefix + key); err != nil {
		return nil, s.fail("get", []string{key}, err)
	}
	var out []byte
	err := s.poll(ctx, "key not set", func() bool {
		v, ok := s.cache[key]
		if ok {
			out = clone(v)
		}
		return ok
	})
	if err != nil {
		return nil, s.fail("get", []string{key}, err)
	}
	return out, nil
}

// Wait implements Store.
func (s *FileStore) Wait(ctx context.Context, keys ...string) error {
	if err := checkKeys(keys); err != nil {
		return s.fail("wait", keys, err)
	}
	err := s.poll(ctx, "keys not set", func() bool { return s.has(keys) })
	if err != nil {
		return s.fail("wait", keys, err)
	}
	return nil
}

func (s *FileStore) has(keys []string) bool {
	for _, k := range keys {
		if _, ok := s.cache[k]; !ok {
			return false
		}
	}
	return true
}

// poll refreshes the cache and evaluates found (under the shared lock) until
// it reports true.
func (s *FileStore) poll(ctx context.Context, what string, found func() bool) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		var ok bool
		err := s.do(ctx, false, func(f *os.File) error {
			if err := s.refresh(f); err != nil {
				return err
			}
			ok = found()
			return nil
		})
		if err != nil || ok {
			return err
		}
		timer.Reset(filePollInterval)
		select {
		case <-timer.C:
		case <-ctx.Done():
			return waitError(ctx, what)
		case <-s.done:
			return ErrStoreClosed
		}
	}
}

// Check implements Store.
func (s *FileStore) Check(ctx context.Context, keys ...string) (bool, error) {
	if err := checkKeys(keys); err != nil {
		return false, s.fail("check", keys, err)
	}
	var ok bool
	err := s.do(ctx, false, func(f *os.File) error {
		if err := s.refresh(f); err != nil {
			return err
		}
		ok = s.has(keys)
		return nil
	})
	if err != nil {
		return false, s.fail("check", keys, err)
	}
	return ok, nil
}

// Add implements Store.
func (s *FileStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := checkKey(fileKeyPrefix + key); err != nil {
		return 0, s.fail("add", []string{key}, err)
	}
	var sum int64
	err := s.do(ctx, true, func(f *os.File) error {
		if err := s.refresh(f); err != nil {
			return err
		}
		n, text, err := addCounter(s.cache[key], delta)
		if err != nil {
			return err
		}
		sum = n
		return appendRecord(f, fileKeyPrefix+key, text)
	})
	if err != nil {
		return 0, s.fail("add", []string{key}, err)
	}
	return sum, nil
}

// CompareAndSet implements Store.
func (s *FileStore) CompareAndSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	if err := checkKey(fileKeyPrefix + key); err != nil {
		return nil, s.fail("compare-and-set", []string{key}, err)
	}
	if err := checkValue(desired); err != nil {
		return nil, s.fail("compare-and-set", []string{key}, err)
	}
	var out []byte
	err := s.do(ctx, true, func(f *os.File) error {
		if err := s.refresh(f); err != nil {
			return err
		}
		// The same rule as table.compareSet, on the replayed cache.
		cur, ok := s.cache[key]
		switch {
		case (!ok && len(expected) == 0) || (ok && string(cur) == string(expected)):
			out = clone(desired)
			return appendRecord(f, fileKeyPrefix+key, desired)
		case !ok:
			out = clone(expected)
		default:
			out = clone(cur)
		}
		return nil
	})
	if err != nil {
		return nil, s.fail("compare-and-set", []string{key}, err)
	}
	return out, nil
}

// Delete implements Store.
func (s *FileStore) Delete(ctx context.Context, key string) (bool, error) {
	var existed bool
	err := s.do(ctx, true, func(f *os.File) error {
		if err := s.refresh(f); err != nil {
			return err
		}
		if _, existed = s.cache[key]; !existed {
			return nil
		}
		return appendRecord(f, fileDeletePrefix+key, nil)
	})
	if err != nil {
		return false, s.fail("delete", []string{key}, err)
	}
	return existed, nil
}

// NumKeys implements Store.
func (s *FileStore) NumKeys(ctx context.Context) (int64, error) {
	var n int64
	err := s.do(ctx, false, func(f *os.File) error {
		if err := s.refresh(f); err != nil {
			return err
		}
		n = int64(len(s.cache))
		return nil
	})
	if err != nil {
		return 0, s.fail("num-keys", nil, err)
	}
	return n, nil
}

// Close implements Store. It leaves the file in place.
func (s *FileStore) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		close(s.done)
	}
	return nil
}
