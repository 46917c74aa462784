package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocomm/comm/internal/faults"
)

// Hostile connection kinds, used in turn.
const (
	hostileGarbage  = iota // random bytes, then close
	hostileHuge            // a plausible start announcing a huge length
	hostileHalfOpen        // connect, send nothing, hold
	hostileDrip            // a byte at a time, slowly
	numHostile
)

// stormResult is the storm scenario's outcome.
type stormResult struct {
	setupErr   error
	targets    []string // addresses attacked
	conns      int      // hostile connections opened
	dialFailed int      // connections that could not be opened
	toData     int      // connections that reached a data listener
	dataGone   int      // connections whose data listener had closed (sent to the store instead)
	closedBy   int      // connections the rank closed on the attacker
	crashes    int      // ranks that exited non-zero or reported an error
	wrong      int      // wrong results
	iterations int      // verified all-reduces on rank 0
	refusals   int      // "connection refused" lines the ranks logged
	detail     []string
}

// listeningPorts returns the TCP ports process pid listens on, from
// /proc (Linux): the sockets among its descriptors in state LISTEN.
func listeningPorts(pid int) ([]int, error) {
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		ports = append(ports, parseListening(f, inodes)...)
		f.Close()
	}
	return ports, nil
}

// parseListening reads a /proc/net/tcp table and returns the local ports
// of the sockets in state LISTEN (0A) whose inode is in inodes.
func parseListening(r io.Reader, inodes map[string]bool) []int {
	var ports []int
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil {
			ports = append(ports, int(p))
		}
	}
	return ports
}

// hostileBytes returns what a connection of kind sends first.
func hostileBytes(kind, i int) []byte {
	switch kind {
	case hostileGarbage:
		b := make([]byte, 1+i%4096)
		rand.Read(b)
		return b
	case hostileHuge:
		switch i % 4 {
		case 0: // torch 1.x SET with a 2^64-1 key length
			return append([]byte{0}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
		case 1: // SET, small key, 1 GiB value, nothing behind it
			b := binary.LittleEndian.AppendUint64([]byte{0}, 1)
			b = append(b, 'k')
			return binary.LittleEndian.AppendUint64(b, 1<<30)
		case 2: // a gocomm frame header announcing 1 TiB
			b := make([]byte, 72)
			binary.LittleEndian.PutUint32(b, 0x4d4f4347)
			b[4], b[5] = 1, 1
			binary.LittleEndian.PutUint64(b[48:], 1<<40)
			binary.LittleEndian.PutUint32(b[64:], 1<<30)
			return b
		default: // MULTI_GET of 2^63 keys (torch 2.x)
			b := binary.LittleEndian.AppendUint32([]byte{0}, 0x3C85F7CE)
			b = append(b, 10)
			return binary.LittleEndian.AppendUint64(b, 1<<63)
		}
	}
	return nil
}

// hostile runs one hostile connection to addr and reports whether the
// other side closed it (true) before the attacker gave up.
func hostile(ctx context.Context, addr string, kind, i int, hold time.Duration) (closed bool, err error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, err
	}
	defer nc.Close()
	closedBy := func() bool {
		nc.SetReadDeadline(time.Now().Add(hold))
		_, err := io.Copy(io.Discard, io.LimitReader(nc, 1<<20))
		ne, ok := err.(net.Error)
		return !(ok && ne.Timeout())
	}
	switch kind {
	case hostileGarbage, hostileHuge:
		nc.SetWriteDeadline(time.Now().Add(hold))
		nc.Write(hostileBytes(kind, i))
		return closedBy(), nil
	case hostileHalfOpen:
		return closedBy(), nil
	default: // drip
		end := time.Now().Add(hold)
		msg := []byte("GCSA\x01 drip drip drip drip drip")
		for k := 0; time.Now().Before(end); k++ {
			nc.SetWriteDeadline(time.Now().Add(hold))
			if _, err := nc.Write(msg[k%len(msg) : k%len(msg)+1]); err != nil {
				return true, nil
			}
			time.Sleep(hold / 10)
		}
		return closedBy(), nil
	}
}

// targets tracks the ports a job's ranks listen on while it runs: the
// store's for the whole job, the data listeners while the ranks connect.
type targets struct {
	mu    sync.Mutex // protects following
	store string
	data  []string
	seen  map[string]bool
	first chan struct{} // closed once any port is known
}

// poll refreshes the ports of pids every few milliseconds until stop.
func (t *targets) poll(pids []int, masterPort int, stop <-chan struct{}) {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		var data []string
		store := ""
		for _, pid := range pids {
			ports, _ := listeningPorts(pid)
			for _, pt := range ports {
				a := net.JoinHostPort("127.0.0.1", strconv.Itoa(pt))
				if pt == masterPort {
					store = a
				} else {
					data = append(data, a)
				}
			}
		}
		t.mu.Lock()
		t.store, t.data = store, data
		for _, a := range append(data, store) {
			if a != "" && !t.seen[a] {
				t.seen[a] = true
			}
		}
		if len(t.seen) > 0 {
			select {
			case <-t.first:
			default:
				close(t.first)
			}
		}
		t.mu.Unlock()
		select {
		case <-tick.C:
		case <-stop:
			return
		}
	}
}

// pick returns a target for connection k: a data port while any listens
// (every other connection), else the store.
func (t *targets) pick(k int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.data) > 0 && (k%2 == 0 || t.store == "") {
		return t.data[k%len(t.data)]
	}
	return t.store
}

func (t *targets) storeAddr() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.store
}

func (t *targets) all() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for a := range t.seen {
		out = append(out, a)
	}
	return out
}

// runStorm starts a looping TCP job with a secret and throws n hostile
// connections at every port its ranks listen on: the first half from the
// moment they start (at the data listeners while they connect, and the
// store), the second half at the store once every rank runs collectives;
// then it stops the job and checks that every rank finished with right
// results.
func runStorm(ctx context.Context, p params, n int, hold time.Duration) stormResult {
	var res stormResult
	stop, err := stopFile()
	if err != nil {
		return stormResult{setupErr: err}
	}
	defer os.Remove(stop)
	o, err := options(p, "tcp")
	if err != nil {
		return stormResult{setupErr: err}
	}
	j, err := faults.Start(ctx, o, "loop", append(localEnv(p), faults.StopEnv+"="+stop, faults.MaxEnv+"=1h",
		"GOCOMM_SECRET=commfault-"+strconv.FormatUint(p.rng.Uint64(), 36), "GOCOMM_DEBUG=warn")...)
	if err != nil {
		return stormResult{setupErr: err}
	}
	defer j.Stop()
	port, pids := j.Port(), j.PIDs()
	tg := &targets{seen: map[string]bool{}, first: make(chan struct{})}
	stopPoll := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		tg.poll(pids, port, stopPoll)
	}()
	defer func() {
		close(stopPoll)
		<-polled
	}()
	select {
	case <-tg.first:
	case <-time.After(p.ready):
		return stormResult{setupErr: fmt.Errorf("the ranks listened on no TCP port within %v", p.ready)}
	}
	var closed, failed, toData, dataGone atomic.Int64
	var firstErr atomic.Value
	sem := make(chan struct{}, 100)
	var wg sync.WaitGroup
	stormDone, readyOrNot := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stormDone)
		for i := range n {
			if i == n/2 {
				// The second half once the ranks run collectives.
				wg.Wait()
				<-readyOrNot
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				k := i / numHostile // the kinds take turns
				addr := tg.pick(k)
				if addr == "" {
					failed.Add(1)
					return
				}
				c, err := hostile(ctx, addr, i%numHostile, k, hold)
				if _, pt, _ := net.SplitHostPort(addr); pt != strconv.Itoa(port) {
					if err == nil {
						toData.Add(1)
					} else { // the listener closed since: the store takes it
						dataGone.Add(1)
						addr = tg.storeAddr()
						c, err = hostile(ctx, addr, i%numHostile, k, hold)
					}
				}
				switch {
				case err != nil:
					if failed.Add(1) == 1 {
						firstErr.Store(fmt.Sprintf("first connection that failed: %s: %v", addr, err))
					}
				case c:
					closed.Add(1)
				}
			})
		}
		wg.Wait()
	}()
	err = j.AwaitReady(p.ready)
	close(readyOrNot)
	if err != nil {
		<-stormDone
		res.setupErr = fmt.Errorf("under the storm: %w", err)
		return res
	}
	<-stormDone
	res.targets = tg.all()
	if e, ok := firstErr.Load().(string); ok {
		res.detail = append(res.detail, e)
	}
	res.toData, res.dataGone = int(toData.Load()), int(dataGone.Load())
	res.conns, res.dialFailed, res.closedBy = n, int(failed.Load()), int(closed.Load())
	if f, err := os.Create(stop); err == nil {
		f.Close()
	}
	for _, o := range j.WaitUntil(time.Now().Add(p.hang + p.timeout)) {
		switch {
		case o.Hung:
			res.crashes++
			res.detail = append(res.detail, fmt.Sprintf("rank %d did not finish after the storm (hang)", o.Rank))
		case o.Wrong != "":
			res.wrong++
			res.detail = append(res.detail, fmt.Sprintf("rank %d: wrong: %s", o.Rank, o.Wrong))
		case o.Fail != nil:
			res.crashes++
			res.detail = append(res.detail, fmt.Sprintf("rank %d: %s", o.Rank, o.Fail.Text))
		case o.Exit != nil:
			res.crashes++
			res.detail = append(res.detail, fmt.Sprintf("rank %d exited: %v; output: %.500s", o.Rank, o.Exit, o.Output))
		}
		if o.Rank == 0 {
			res.iterations = o.Iters
		}
		res.refusals += strings.Count(o.Output, "connection refused")
	}
	return res
}
