package rendezvous

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// TCPStoreServer hosts a TCP store: the server half of PyTorch's TCPStore,
// run by rank 0 (or by a launcher). It speaks both the torch 1.x and the
// torch 2.x protocol, chosen per connection from its first bytes, so gocomm
// ranks and torch ranks of either generation can share it. See the package
// doc for what is and is not supported.
//
// Each connection is served by its own goroutine; a connection that sends
// something the server cannot serve (an unknown query, a key over
// MaxKeyLen, a value over MaxValueLen, more than MaxKeys keys, a GET of a
// missing key, an ADD to a non-counter) is closed and the others carry on.
type TCPStoreServer struct {
	ln   net.Listener
	done chan struct{} // closed by Close
	wg   sync.WaitGroup

	mu     sync.Mutex // protects following
	t      *table
	conns  map[*serverConn]struct{}
	closed bool
}

// ListenTCPStore starts a TCP store server listening on addr ("host:port";
// port 0 picks a free one, see Addr).
func ListenTCPStore(addr string) (*TCPStoreServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &Error{Op: "listen", Store: "tcp " + addr, Err: fmt.Errorf("cannot listen for the store (is another job's master still on this port?): %w", err)}
	}
	s := &TCPStoreServer{
		ln:    ln,
		done:  make(chan struct{}),
		t:     newTable(),
		conns: map[*serverConn]struct{}{},
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Addr returns the address the server listens on.
func (s *TCPStoreServer) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server: it stops accepting, closes every connection (so
// every client blocked in a wait gets an error) and returns once every
// goroutine it started has ended. Closing twice is not an error.
func (s *TCPStoreServer) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	close(s.done)
	err := s.ln.Close()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *TCPStoreServer) acceptLoop() {
	defer s.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			// Out of file descriptors and the like: wait and retry.
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.done:
				t.Stop()
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		c := &serverConn{srv: s, nc: nc, br: bufio.NewReader(nc)}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// serverConn is one client connection.
type serverConn struct {
	srv *TCPStoreServer
	nc  net.Conn
	br  *bufio.Reader

	wmu sync.Mutex // serialises writes: replies and the waiter's STOP_WAITING

	// pending is the connection's outstanding WAIT; owned by serve.
	pending *pendingWait
}

// pendingWait is a WAIT that could not be answered at once. Its goroutine
// sends STOP_WAITING when w fires, unless cancel closes first.
type pendingWait struct {
	w      *waiter
	cancel chan struct{}
	done   chan struct{} // closed when the goroutine has ended
}

func (c *serverConn) serve() {
	defer c.srv.wg.Done()
	defer func() {
		c.endWait()
		c.nc.Close()
		c.srv.mu.Lock()
		delete(c.srv.conns, c)
		c.srv.mu.Unlock()
	}()
	d, err := detectDialect(c.br)
	if err != nil {
		return
	}
	first := true
	for {
		req, err := readRequest(c.br, d)
		if err != nil {
			return
		}
		if d == dialectV2 && first != (req.op == opValidate) {
			return // 2.x: VALIDATE first and only first
		}
		first = false
		if err := c.handle(req); err != nil {
			return
		}
	}
}

// errDrop makes serve close the connection.
var errDrop = errors.New("drop connection")

func (c *serverConn) handle(req request) error {
	s := c.srv
	switch req.op {
	case opValidate:
		if req.word != validationMagic {
			return errDrop
		}
		return nil
	case opPing:
		return c.write(binary.LittleEndian.AppendUint32(nil, req.word))
	case opSet:
		s.mu.Lock()
		s.t.set(req.keys[0], req.values[0])
		s.mu.Unlock()
		return nil
	case opAppend:
		s.mu.Lock()
		s.t.appendTo(req.keys[0], req.values[0])
		s.mu.Unlock()
		return nil
	case opMultiSet:
		s.mu.Lock()
		for i, k := range req.keys {
			s.t.set(k, req.values[i])
		}
		s.mu.Unlock()
		return nil
	case opCompareSet:
		s.mu.Lock()
		v := s.t.compareSet(req.keys[0], req.values[0], req.values[1])
		s.mu.Unlock()
		return c.write(appendSized(nil, v))
	case opGet, opMultiGet:
		var out []byte
		s.mu.Lock()
		for _, k := range req.keys {
			v, ok := s.t.get(k)
			if !ok {
				s.mu.Unlock()
				return errDrop // torch's server fails the same way; clients WAIT first
			}
			out = appendSized(out, v)
		}
		s.mu.Unlock()
		return c.write(out)
	case opAdd:
		s.mu.Lock()
		n, err := s.t.add(req.keys[0], req.delta)
		s.mu.Unlock()
		if err != nil {
			return errDrop
		}
		return c.write(binary.LittleEndian.AppendUint64(nil, uint64(n)))
	case opCheck:
		s.mu.Lock()
		ok := s.t.check(req.keys)
		s.mu.Unlock()
		if ok {
			return c.write([]byte{checkReady})
		}
		return c.write([]byte{checkNotReady})
	case opWait:
		return c.startWait(req.keys)
	case opCancelWait:
		c.endWait()
		return c.write([]byte{waitCanceled})
	case opNumKeys:
		s.mu.Lock()
		n := s.t.numKeys()
		s.mu.Unlock()
		return c.write(binary.LittleEndian.AppendUint64(nil, uint64(n)))
	case opDeleteKey:
		s.mu.Lock()
		ok := s.t.remove(req.keys[0])
		s.mu.Unlock()
		var n uint64
		if ok {
			n = 1
		}
		return c.write(binary.LittleEndian.AppendUint64(nil, n))
	default: // opWatchKey: torch 1.x watch callbacks are not supported
		return errDrop
	}
}

func (c *serverConn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.nc.Write(b)
	return err
}

// startWait answers WAIT at once if every key exists, else leaves a
// goroutine to answer when they do. One WAIT per connection may be pending,
// as with torch's clients, which wait for the answer (or cancel) before
// sending another.
func (c *serverConn) startWait(keys []string) error {
	if p := c.pending; p != nil {
		select {
		case <-p.w.ready:
			// Answered: the client may have read STOP_WAITING before the
			// goroutine that sent it has ended.
			<-p.done
			c.pending = nil
		default:
			return errDrop
		}
	}
	s := c.srv
	s.mu.Lock()
	w := s.t.watch(keys)
	s.mu.Unlock()
	if w == nil {
		return c.write([]byte{waitStop})
	}
	p := &pendingWait{w: w, cancel: make(chan struct{}), done: make(chan struct{})}
	c.pending = p
	go func() {
		defer close(p.done)
		select {
		case <-w.ready:
			c.write([]byte{waitStop}) // a failure shows up in serve's next read
		case <-p.cancel:
		case <-s.done:
		}
	}()
	return nil
}

// endWait cancels the pending WAIT, if any, and waits for its goroutine, so
// that a STOP_WAITING it was sending goes out before whatever follows.
func (c *serverConn) endWait() {
	p := c.pending
	if p == nil {
		return
	}
	c.pending = nil
	close(p.cancel)
	<-p.done
	c.srv.mu.Lock()
	c.srv.t.unwatch(p.w)
	c.srv.mu.Unlock()
}
