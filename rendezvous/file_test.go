//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package rendezvous

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// torchLog is a log as torch's FileStore writes it: set("a", "1"),
// add("n", 2), the "cleanup/" counter a finished worker bumps, then
// delete_key("a").
func torchLog(t *testing.T) []byte {
	return unhex(t, ""+
		"02000000 2f61 01000000 31"+ // "/a" = "1"
		"02000000 2f6e 01000000 32"+ // "/n" = "2"
		"08000000 636c65616e75702f 01000000 31"+ // "cleanup/" = "1"
		"03000000 2d2f61 00000000") // "-/a": tombstone
}

func TestDecodeLogTorchFormat(t *testing.T) {
	log := torchLog(t)
	recs, n := decodeLog(log)
	want := []logRecord{
		{"/a", []byte("1")}, {"/n", []byte("2")}, {"cleanup/", []byte("1")}, {"-/a", []byte{}},
	}
	if n != len(log) || !reflect.DeepEqual(recs, want) {
		t.Fatalf("decodeLog = %q, %d; want %q, %d", recs, n, want, len(log))
	}
	var enc []byte
	for _, r := range recs {
		enc = appendLogRecord(enc, r.key, r.value)
	}
	if !bytes.Equal(enc, log) {
		t.Fatalf("re-encoded %x, want %x", enc, log)
	}
	cache := map[string][]byte{}
	applyLog(cache, recs)
	if !reflect.DeepEqual(cache, map[string][]byte{"n": []byte("2")}) {
		t.Fatalf("replayed cache = %q", cache)
	}
	// Every proper prefix decodes to the complete records it holds.
	for cut := range len(log) {
		recs, n := decodeLog(log[:cut])
		if n > cut || len(recs) > len(want) || (len(recs) > 0 && !reflect.DeepEqual(recs, want[:len(recs)])) {
			t.Fatalf("prefix %d: %q, %d", cut, recs, n)
		}
	}
}

func TestFileStoreReadsTorchLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	if err := os.WriteFile(path, torchLog(t), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := NewFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := testCtx(t)
	wantValue(t, s, "n", "2")
	if ok, err := s.Check(ctx, "a"); err != nil || ok {
		t.Fatalf("deleted key a: Check = %v, %v", ok, err)
	}
	if n, err := s.NumKeys(ctx); err != nil || n != 1 {
		t.Fatalf("NumKeys = %d, %v; want 1 (cleanup/ is not a key)", n, err)
	}
	if n, err := s.Add(ctx, "n", 40); err != nil || n != 42 {
		t.Fatalf("Add = %d, %v", n, err)
	}
	mustSet(t, s, "b", "x")
	if _, err := s.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	// What we appended is torch's format too.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tail := data[len(torchLog(t)):]
	want := appendLogRecord(nil, "/n", []byte("42"))
	want = appendLogRecord(want, "/b", []byte("x"))
	want = appendLogRecord(want, "-/b", nil)
	if !bytes.Equal(tail, want) {
		t.Fatalf("appended %x, want %x", tail, want)
	}
}

func TestFileStoreTruncatedTailAndRecreatedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s, err := NewFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := testCtx(t)
	mustSet(t, s, "a", "1")
	// A writer's record in progress: half a record, then the rest.
	rec := appendLogRecord(nil, "/b", []byte("two"))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(rec[:5]); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Check(ctx, "b"); err != nil || ok {
		t.Fatalf("half-written key visible: %v, %v", ok, err)
	}
	got := asyncGet(ctx, s, "b")
	notYet(t, got, "Get of a half-written key")
	if _, err := f.Write(rec[5:]); err != nil {
		t.Fatal(err)
	}
	if r := within(t, got, 5*time.Second, "Get"); r.err != nil || string(r.v) != "two" {
		t.Fatalf("Get = %q, %v", r.v, r.err)
	}
	// A new job truncated the file: the store starts over.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := s.NumKeys(ctx); err != nil || n != 0 {
		t.Fatalf("NumKeys after truncation = %d, %v", n, err)
	}
	mustSet(t, s, "c", "3")
	wantValue(t, s, "c", "3")
}

func TestFileStoreRespectsOtherProcessesLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s, err := NewFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	holder, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Set(ctx, "k", []byte("v")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Set while another process holds the lock: %v, want a deadline error", err)
	}
	set := make(chan error, 1)
	go func() { set <- s.Set(testCtx(t), "k", []byte("v")) }()
	notYet(t, set, "Set under a foreign lock")
	syscall.Flock(int(holder.Fd()), syscall.LOCK_UN)
	if err := within(t, set, 5*time.Second, "Set after unlock"); err != nil {
		t.Fatal(err)
	}
	// Close interrupts a wait for the lock.
	syscall.Flock(int(holder.Fd()), syscall.LOCK_EX)
	blocked := make(chan error, 1)
	go func() { blocked <- s.Set(testCtx(t), "k2", nil) }()
	notYet(t, blocked, "Set under a foreign lock")
	s.Close()
	if err := within(t, blocked, 5*time.Second, "Set across Close"); !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("Set across Close: %v, want ErrStoreClosed", err)
	}
}

func TestNewFileStoreBadPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "store")
	_, err := NewFileStore(path)
	if err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("NewFileStore(%s) = %v, want an error naming the path", path, err)
	}
}
