//go:build linux && !gocomm_portable

package transport

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// shmSupported says whether this platform has shared-memory rings: mmap of
// a shared file and futexes to sleep on words inside it.
const shmSupported = true

const (
	futexWaitOp = 0 // FUTEX_WAIT; not _PRIVATE: the word is shared between processes
	futexWakeOp = 1 // FUTEX_WAKE
)

// futexWait sleeps while *addr == val, for at most d; it returns early on
// a wake, a signal, or when *addr differs.
func futexWait(addr *uint32, val uint32, d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitOp, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWaitHeld is futexWait without telling the Go runtime that the
// thread is in a system call: the thread keeps its P while it sleeps (see
// sleepOn).
func futexWaitHeld(addr *uint32, val uint32, d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	syscall.RawSyscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitOp, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes every sleeper on addr.
func futexWake(addr *uint32) {
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakeOp, uintptr(1<<31-1), 0, 0, 0)
}

// osYield gives the CPU to another runnable thread, of any process. It
// goes through syscall.Syscall, so the runtime knows the thread is in a
// system call: a raw call here (tried) made TestMultiHostEnvironments
// fail in about one run in eight ("peer closed the communicator" in a
// hierarchical broadcast); why is not understood yet.
func osYield() {
	syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
}

// systemCallCost returns the least time one system call that does no work
// took here, out of 8: what a yield costs when it has nothing to switch
// to (getppid: it never sleeps nor switches).
func systemCallCost() time.Duration {
	least := time.Duration(-1)
	for range 8 {
		t := time.Now()
		syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0)
		if d := time.Since(t); least < 0 || d < least {
			least = d
		}
	}
	return least
}

// createSegment creates a new file of size bytes named name in the first
// usable directory and maps it shared. The caller unlinks the file.
func createSegment(dir, name string, size int) (mem []byte, path string, err error) {
	var errs []error
	for _, d := range shmDirs(dir) {
		path = filepath.Join(d, name)
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		mem, err = mapFile(f, size, true)
		f.Close()
		if err != nil {
			os.Remove(path)
			errs = append(errs, err)
			continue
		}
		return mem, path, nil
	}
	return nil, "", errors.Join(errs...)
}

// openSegment maps the existing segment file at path, which must be size
// bytes long.
func openSegment(path string, size int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return mapFile(f, size, false)
}

func mapFile(f *os.File, size int, create bool) ([]byte, error) {
	if create {
		// Reserve the memory now: a file only truncated to size has
		// holes, and touching one that the file system (tmpfs, a
		// container's 64 MB /dev/shm) has no room for is a SIGBUS that
		// kills the process, not an error.
		err := unix.Fallocate(int(f.Fd()), 0, 0, int64(size))
		for err == syscall.EINTR { // the runtime's preemption signal, say
			err = unix.Fallocate(int(f.Fd()), 0, 0, int64(size))
		}
		if err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil, fmt.Errorf("%s: no room for %d bytes of shared memory in %s (a container's /dev/shm is 64 MB unless raised: docker run --shm-size, or a larger emptyDir medium Memory on Kubernetes): %w",
					f.Name(), size, filepath.Dir(f.Name()), err)
			}
			if err := f.Truncate(int64(size)); err != nil { // a file system without fallocate
				return nil, err
			}
		}
	} else {
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if st.Size() != int64(size) {
			return nil, fmt.Errorf("%s is %d bytes, want %d", f.Name(), st.Size(), size)
		}
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	return mem, nil
}

func unmapSegment(mem []byte) error { return syscall.Munmap(mem) }

// prefault maps every page of ring (a page-aligned part of the segment)
// into this process before the first message, so that no send or receive
// takes a page fault in the ring's first lap. On a virtual machine whose
// memory the host supplies lazily (Firecracker, say), such a fault is a
// stall of many small operations' time, every few operations of the
// first lap.
// MADV_POPULATE_WRITE (Linux 5.14) faults the pages in writable without
// changing them; a read of each page then maps whatever it left (it
// halved the stalls alone, the read pass took them from ~290 per lap to
// 5-60). Both are safe while the peer already writes the ring: neither
// changes a byte.
func prefault(ring []byte) {
	if len(ring) == 0 {
		return
	}
	_ = unix.Madvise(ring, unix.MADV_POPULATE_WRITE) // older kernels: EINVAL, the reads do it
	var sum byte
	for i := 0; i < len(ring); i += shmPage {
		sum += ring[i]
	}
	prefaultSink.Add(uint32(sum))
}

// prefaultSink keeps prefault's reads from being optimized away.
var prefaultSink atomic.Uint32

// readPeer copies len(dst) bytes from address addr of process pid into
// dst with process_vm_readv (cross-memory attach: one copy, by the
// kernel, from the other process's pages). It fails if the kernel refuses
// (no permission to trace pid, a seccomp filter) or the range is not
// mapped there.
func readPeer(pid int, addr uint64, dst []byte) error {
	for len(dst) > 0 {
		local := [1]unix.Iovec{{Base: &dst[0]}}
		local[0].SetLen(len(dst))
		remote := [1]unix.RemoteIovec{{Base: uintptr(addr), Len: len(dst)}}
		n, err := unix.ProcessVMReadv(pid, local[:], remote[:], 0)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("process_vm_readv of %d bytes at %#x in process %d: %w", len(dst), addr, pid, err)
		case n <= 0:
			return fmt.Errorf("process_vm_readv of %d bytes at %#x in process %d: nothing readable", len(dst), addr, pid)
		}
		dst = dst[n:]
		addr += uint64(n)
	}
	return nil
}
