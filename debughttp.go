package comm

// Opt-in debug endpoints of a world's flight recorders: an HTTP server
// answering with their JSON (GOCOMM_DEBUG_ADDR, Options.DebugAddr) and a
// dump on SIGUSR1 (GOCOMM_FLIGHT_RECORDER_SIGNAL,
// Options.FlightRecorderSignal).

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/env"
)

// debugServer is a world's debug endpoints; the zero value has none.
type debugServer struct {
	mu     sync.Mutex // protects following
	srv    *http.Server
	addr   net.Addr
	sigs   chan os.Signal
	served chan struct{} // closed when the server goroutine has returned
	dumped chan struct{} // closed when the signal goroutine has returned
	want   [2]string     // the HTTP address and the signal's destination asked for
}

// debugListenAddr is the address local rank l serves on: the port of addr
// plus l, so that the ranks of one host can share a setting; port 0 lets
// the kernel choose for each.
func debugListenAddr(addr string, l int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("comm: %s=%q: want host:port, such as 127.0.0.1:6060: %w", env.EnvDebugAddr, addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p+l > 65535 {
		return "", fmt.Errorf("comm: %s=%q: port %q is not a TCP port (local rank %d serves on port+%d)", env.EnvDebugAddr, addr, port, l, l)
	}
	if p > 0 {
		p += l
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}

// startHTTP serves the world's flight record as JSON on addr (after
// debugListenAddr) at "/" and "/debug/gocomm/flightrec".
func (f *flightWorld) startHTTP(addr string, localRank int) error {
	at, err := debugListenAddr(addr, localRank)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", at)
	if err != nil {
		return fmt.Errorf("comm: debug endpoint (%s=%q): %w", env.EnvDebugAddr, addr, err)
	}
	mux := http.NewServeMux()
	serve := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(f.record(0))
	}
	mux.HandleFunc("GET /{$}", serve)
	mux.HandleFunc("GET /debug/gocomm/flightrec", serve)
	d := &f.debug
	d.mu.Lock()
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	d.addr = ln.Addr()
	d.served = make(chan struct{})
	srv, served := d.srv, d.served
	d.mu.Unlock()
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	return nil
}

// startSignal dumps the world's flight record as JSON on SIGUSR1: to
// stderr when to is "1", "true" or "stderr", else into the directory to,
// as gocomm-flightrec-rank<r>.json.
func (f *flightWorld) startSignal(to string, stderr io.Writer) error {
	if len(dumpSignals) == 0 {
		return fmt.Errorf("comm: %s: this system has no SIGUSR1", env.EnvFlightRecorderSignal)
	}
	d := &f.debug
	d.mu.Lock()
	d.sigs = make(chan os.Signal, 1)
	d.dumped = make(chan struct{})
	sigs, dumped := d.sigs, d.dumped
	d.mu.Unlock()
	signal.Notify(sigs, dumpSignals...)
	go func() {
		defer close(dumped)
		for range sigs {
			_ = f.dumpTo(to, stderr)
		}
	}()
	return nil
}

func (f *flightWorld) dumpTo(to string, stderr io.Writer) error {
	data, err := json.MarshalIndent(f.record(0), "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	switch to {
	case "1", "true", "stderr":
		_, err = stderr.Write(data)
		return err
	}
	return os.WriteFile(filepath.Join(to, fmt.Sprintf("gocomm-flightrec-rank%d.json", f.rank)), data, 0o644)
}

// DebugAddr is the address the world's debug HTTP endpoint listens on, or
// nil when it has none (Options.DebugAddr and GOCOMM_DEBUG_ADDR unset).
func (r *FlightRecorder) DebugAddr() net.Addr {
	c := (*Comm)(r)
	if c == nil {
		return nil
	}
	f := c.root().flight
	if f == nil {
		return nil
	}
	f.debug.mu.Lock()
	defer f.debug.mu.Unlock()
	return f.debug.addr
}

// stopDebug stops the endpoints and waits for their goroutines.
func (f *flightWorld) stopDebug() error {
	d := &f.debug
	d.mu.Lock()
	srv, served, sigs, dumped := d.srv, d.served, d.sigs, d.dumped
	d.srv, d.sigs, d.addr = nil, nil, nil
	d.mu.Unlock()
	var err error
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if e := srv.Shutdown(ctx); e != nil && !errors.Is(e, http.ErrServerClosed) {
			err = srv.Close()
		}
		cancel()
		<-served
	}
	if sigs != nil {
		signal.Stop(sigs)
		close(sigs)
		<-dumped
	}
	return err
}

// startFlight starts what a world Init made serves its flight recorders
// with: the watcher that answers the other ranks' timeouts, and the
// endpoints opts or the environment ask for.
func (c *Comm) startFlight(opts Options) error {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if err := c.startFlightExchange(); err != nil {
		return err
	}
	addr := cmp.Or(opts.DebugAddr, getenv(env.EnvDebugAddr))
	to := cmp.Or(opts.FlightRecorderSignal, getenv(env.EnvFlightRecorderSignal))
	if to == "0" {
		to = ""
	}
	return c.startDebug(addr, to)
}

// startDebug starts the endpoints asked for ("" for none) and remembers
// them: a shrunk world takes them over.
func (c *Comm) startDebug(addr, signalTo string) error {
	c.flight.debug.mu.Lock()
	c.flight.debug.want = [2]string{addr, signalTo}
	c.flight.debug.mu.Unlock()
	if addr != "" {
		if err := c.flight.startHTTP(addr, c.local.rank); err != nil {
			return err
		}
		c.log.Info("comm: flight recorder served over HTTP", "addr", c.FlightRecorder().DebugAddr().String())
	}
	if signalTo != "" {
		if err := c.flight.startSignal(signalTo, os.Stderr); err != nil {
			return err
		}
	}
	return nil
}

// handDebugTo stops c's endpoints and starts them on the shrunk world nc.
func (c *Comm) handDebugTo(nc *Comm) error {
	f := c.root().flight
	f.debug.mu.Lock()
	want := f.debug.want
	f.debug.mu.Unlock()
	if want == [2]string{} {
		return nil
	}
	f.stopDebug()
	return nc.startDebug(want[0], want[1])
}

// startFlightExchange starts the watcher of a world with a store and
// other ranks.
func (c *Comm) startFlightExchange() error {
	if c.flight != nil && c.store != nil && c.size > 1 {
		var failed <-chan struct{}
		if fs, ok := c.be.(backend.FailureSignal); ok {
			failed = fs.Failed()
		}
		c.flight.startWatcher(c.store, c.timeout, failed)
	}
	return nil
}
