package comm

// Options resolution: Init applies Options, the launcher's variables (read
// by package env) and the GOCOMM_* knobs, in that order, and opens the
// meeting place. The contract itself (the variables, launchers and
// rendezvous choice) is package env's; env.go re-exports its names.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gocomm/comm/algo"
	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/core"
	"github.com/gocomm/comm/env"
	"github.com/gocomm/comm/internal/cpubind"
	"github.com/gocomm/comm/internal/transport"
	"github.com/gocomm/comm/profile"
	"github.com/gocomm/comm/rendezvous"
)

// config is Options with every default and environment variable applied.
type config struct {
	launcher             Launcher
	rank, size           int
	localRank, localSize int
	nodeRank             int
	rdzv                 Rendezvous
	backend              string
	timeout              time.Duration
	// initTimeout bounds Init (see initTimeoutOf).
	initTimeout time.Duration
	// job and jobFrom are the launcher's job identity and the variable
	// it came from ("" when it gave none), for the join check (join.go).
	job, jobFrom string
	secret       []byte
	// storeAuth: the store rank 0 hosts requires the authenticated
	// handshake (GOCOMM_SECRET set, GOCOMM_STORE_AUTH not 0).
	storeAuth    bool
	listenHost   string
	socketIfname string
	// storeLocal is this rank's address on its connection to the store
	// Init opened, if that is a TCP store.
	storeLocal net.Addr
	algorithms Algorithms
	logger     *slog.Logger
	// profile is GOCOMM_PROFILE, for the comms logger.
	profile string
	// profiling is the comms logger's configuration (profile.go).
	profiling *profile.Config
	// ownBootstrap: the backend meets without a store (MPI).
	ownBootstrap bool
	transport    backend.TransportConfig
	// transportKind is Options.Transport.Kind, before resolveKnobs parses
	// it (or GOCOMM_TRANSPORT) into transport.Mode.
	transportKind TransportKind
	// bindCPUs are the CPUs GOCOMM_BIND binds the process to (nil: none).
	bindCPUs []int
	// sharedProcs is the GOMAXPROCS GOCOMM_BIND=auto gives a rank when
	// ranks outnumber CPUs (0: none).
	sharedProcs int
	// settle is GOCOMM_SETTLE, if settleSet (else the backend's default).
	settle    time.Duration
	settleSet bool
}

// resolve applies the environment to opts.
func resolve(opts Options) (config, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	e := env.Reader{Getenv: getenv, MPIBootstrap: mpiBootstrapper() != nil}
	if opts.Timeout < 0 {
		return config{}, fmt.Errorf("%w: Options.Timeout %v, want > 0 (or 0 for GOCOMM_TIMEOUT, else DefaultTimeout)", ErrInvalid, opts.Timeout)
	}
	cfg := config{
		rank: opts.Rank, size: opts.Size,
		localRank: opts.LocalRank, localSize: opts.LocalSize,
		nodeRank: -1,
		backend:  opts.Backend, timeout: opts.Timeout, secret: opts.Secret,
		listenHost: opts.Transport.ListenHost, socketIfname: opts.Transport.SocketIfname, algorithms: opts.Algorithms, logger: opts.Logger,
		transport:     backend.TransportConfig{HostID: opts.Transport.HostID, SingleCopyBytes: opts.Transport.SingleCopyBytes, SHMStores: opts.Transport.SHMStores, TCPCongestion: opts.Transport.TCPCongestion},
		transportKind: opts.Transport.Kind,
	}
	if cfg.size == 0 {
		world, err := e.Read()
		if err != nil {
			return cfg, err
		}
		cfg.launcher, cfg.rank, cfg.size, cfg.nodeRank, cfg.rdzv = world.Launcher, world.Rank, world.Size, world.NodeRank, world.Rendezvous
		if cfg.localSize == 0 {
			cfg.localRank, cfg.localSize = world.LocalRank, world.LocalSize
		}
	}
	if cfg.size < 1 {
		return cfg, env.Errorf("world size %d, want >= 1", cfg.size)
	}
	if cfg.rank < 0 || cfg.rank >= cfg.size {
		return cfg, env.Errorf("rank %d out of range for world size %d", cfg.rank, cfg.size)
	}
	if cfg.localSize == 0 {
		cfg.localRank, cfg.localSize = cfg.rank, cfg.size
	}
	if err := resolveKnobs(e, &cfg); err != nil {
		return cfg, err
	}
	if d, ok := backend.Lookup(cfg.backend); ok {
		if sb, ok := d.(backend.SelfBootstrapping); ok && sb.OwnBootstrap() {
			cfg.ownBootstrap = true
		}
	}
	if !cfg.ownBootstrap {
		if err := resolveRendezvous(e, &cfg, opts); err != nil {
			return cfg, err
		}
	}
	// The comms logger (profile.go): Options.Profile, else GOCOMM_PROFILE,
	// GOCOMM_PROFILE_* and GOCOMM_TRACE_DIR, read by profile.FromEnv.
	prof, err := profileConfig(opts.Profile, e.Get)
	if err != nil {
		return cfg, err
	}
	cfg.profiling = prof
	return cfg, nil
}

// resolveRendezvous applies Options and GOCOMM_INIT_METHOD to the meeting
// place and checks that a world of several ranks has one.
func resolveRendezvous(e env.Reader, cfg *config, opts Options) error {
	fromOpts, err := initMethodOption(opts.InitMethod)
	if err != nil {
		return err
	}
	if cfg.size == 1 || opts.Store != nil {
		cfg.rdzv = Rendezvous{}
		return nil
	}
	if opts.MasterAddr != "" || opts.MasterPort != 0 {
		host, port := opts.MasterAddr, opts.MasterPort
		if h, p, err := net.SplitHostPort(cfg.rdzv.Addr); err == nil && cfg.rdzv.Kind != RendezvousFile && cfg.rdzv.Kind != RendezvousEtcd {
			if host == "" {
				host = h
			}
			if port == 0 {
				port, _ = strconv.Atoi(p)
			}
		}
		if host == "" {
			host = e.Get(env.EnvMasterAddr)
		}
		if port == 0 && e.Get(env.EnvMasterPort) != "" {
			var err error
			if port, err = e.Int(env.EnvMasterPort); err != nil {
				return err
			}
		}
		switch {
		case host == "":
			return env.Errorf("Options.MasterPort is set but not the master's host: set Options.MasterAddr or %s to the host of rank 0", env.EnvMasterAddr)
		case port <= 0 || port > 65535:
			return env.Errorf("Options.MasterAddr is set but master port %d is not a TCP port: set Options.MasterPort or %s to a free port rank 0 can listen on", port, env.EnvMasterPort)
		}
		kind := RendezvousTCP
		if cfg.rdzv.Kind == RendezvousAgent {
			kind = RendezvousAgent
		}
		cfg.rdzv = Rendezvous{Kind: kind, Addr: net.JoinHostPort(host, strconv.Itoa(port)), Prefix: cfg.rdzv.Prefix, From: "Options.MasterAddr/MasterPort"}
		return nil
	}
	if fromOpts.Kind != RendezvousNone {
		cfg.rdzv = fromOpts // Options beat the environment
		return nil
	}
	if cfg.rdzv.Kind != RendezvousNone {
		return nil // from the launcher's variables
	}
	// Explicit Rank/Size in Options: the meeting place comes from
	// GOCOMM_INIT_METHOD, else MASTER_ADDR and MASTER_PORT.
	if init := e.Get(env.EnvInitMethod); init != "" && init != "env://" {
		r, err := env.ParseInitMethod(init)
		if err != nil {
			return err
		}
		cfg.rdzv = r
		return nil
	}
	addr, port := e.Get(env.EnvMasterAddr), e.Get(env.EnvMasterPort)
	if addr == "" && port == "" {
		return env.Errorf("world of %d ranks but no rendezvous: set %s and %s (or Options.MasterAddr/MasterPort, Options.InitMethod, Options.Store, or %s)", cfg.size, env.EnvMasterAddr, env.EnvMasterPort, env.EnvInitMethod)
	}
	hp, err := env.MasterHostPort(addr, port)
	if err != nil {
		return err
	}
	cfg.rdzv = Rendezvous{Kind: RendezvousTCP, Addr: hp, From: env.EnvMasterAddr + ":" + env.EnvMasterPort}
	return nil
}

// initMethodOption parses Options.InitMethod: the zero Rendezvous for ""
// and "env://" (the environment decides).
func initMethodOption(s string) (Rendezvous, error) {
	if s == "" || s == "env://" {
		return Rendezvous{}, nil
	}
	r, err := env.ParseInitMethod(s)
	if err != nil {
		// The same reason, named after the option instead of the variable.
		why := strings.TrimPrefix(err.Error(), env.ErrEnvironment.Error()+": "+env.EnvInitMethod+"="+strconv.Quote(s)+": ")
		return r, env.Errorf("Options.InitMethod = %q: %s", s, why)
	}
	r.From = "Options.InitMethod"
	return r, nil
}

// resolveKnobs applies the GOCOMM_* knobs Options left unset.
func resolveKnobs(e env.Reader, cfg *config) error {
	if cfg.backend == "" {
		cfg.backend = e.Get(env.EnvBackend)
	}
	if cfg.backend == "" {
		cfg.backend = "native"
	}
	chosen := cfg.timeout != 0
	if cfg.timeout == 0 {
		if v := e.Get(env.EnvTimeout); v != "" {
			chosen = true
			d, err := time.ParseDuration(v)
			if err != nil {
				secs, err2 := strconv.ParseFloat(v, 64)
				if err2 != nil {
					return env.Errorf("%s=%q: want a duration such as 90s or 30m", env.EnvTimeout, v)
				}
				d = time.Duration(secs * float64(time.Second))
			}
			cfg.timeout = d
		} else if v := e.Get(env.EnvDeepSpeedTimeout); v != "" {
			mins, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return env.Errorf("%s=%q: want minutes, such as 30", env.EnvDeepSpeedTimeout, v)
			}
			cfg.timeout = time.Duration(mins * float64(time.Minute))
			chosen = true
		}
	}
	if cfg.timeout <= 0 {
		cfg.timeout = DefaultTimeout
	}
	// Init's bound: GOCOMM_INIT_TIMEOUT, else the operations' timeout
	// when it was chosen, else defaultInitTimeout.
	switch v := e.Get(env.EnvInitTimeout); {
	case v != "":
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return env.Errorf("%s=%q: want a positive duration such as 90s or 10m", env.EnvInitTimeout, v)
		}
		cfg.initTimeout = d
	case chosen:
		cfg.initTimeout = cfg.timeout
	default:
		cfg.initTimeout = defaultInitTimeout
	}
	cfg.job, cfg.jobFrom = e.JobIdentity()
	if cfg.secret == nil {
		if v := e.Getenv(env.EnvSecret); v != "" { // untrimmed: white space may be part of a secret
			cfg.secret = []byte(v)
		}
	}
	if cfg.secret != nil {
		on, err := storeAuth(e.Get(env.EnvStoreAuth))
		if err != nil {
			return err
		}
		cfg.storeAuth = on
	}
	if cfg.listenHost == "" {
		cfg.listenHost = e.Get(env.EnvSocketHost)
	}
	if cfg.socketIfname == "" {
		cfg.socketIfname = cmp.Or(e.Get(env.EnvSocketIfname), e.Get(env.EnvGlooIfname))
	}
	// The transport mode is parsed here, once: the backend gets the value.
	if mode, from := string(cfg.transportKind), "Options.Transport.Kind"; true {
		if mode == "" {
			mode, from = e.Get(env.EnvTransport), env.EnvTransport
		}
		m, err := core.ParseTransportMode(mode)
		if err != nil {
			return env.Errorf("%s=%q: %v", from, mode, err)
		}
		cfg.transport.Mode = m
	}
	if cfg.transport.HostID == "" {
		cfg.transport.HostID = e.Get(env.EnvHostID)
	}
	if v := e.Get(env.EnvSingleCopy); v != "" && cfg.transport.SingleCopyBytes == 0 {
		n, err := strconv.Atoi(v)
		switch {
		case v == "off" || v == "0":
			n = -1
		case err != nil || n < 0:
			return env.Errorf("%s=%q: want a message size in bytes (e.g. 262144) or off", env.EnvSingleCopy, v)
		}
		cfg.transport.SingleCopyBytes = n
	}
	if cfg.transport.SHMStores == "" {
		cfg.transport.SHMStores = e.Get(env.EnvSHMStores)
	}
	if err := transport.CheckSHMStores(cfg.transport.SHMStores); err != nil {
		return env.Errorf("Options.Transport.SHMStores (%s) %q: want auto, cached or bypass", env.EnvSHMStores, cfg.transport.SHMStores)
	}
	if cfg.transport.TCPCongestion == "" {
		cfg.transport.TCPCongestion = e.Get(env.EnvTCPCongestion)
	}
	if err := transport.CheckCongestion(cfg.transport.TCPCongestion); err != nil {
		return env.Errorf("Options.Transport.TCPCongestion (%s): %v", env.EnvTCPCongestion, err)
	}
	if v := e.Get(env.EnvSettle); v != "" {
		d, err := time.ParseDuration(v) // "0" included
		if v == "off" {
			d, err = 0, nil
		}
		if err != nil || d < 0 || d > time.Minute {
			return env.Errorf("%s=%q: want a duration up to 1m such as 10ms, or 0 (off)", env.EnvSettle, v)
		}
		cfg.settle, cfg.settleSet = d, true
	}
	if v := e.Get(env.EnvBind); v != "" {
		allowed, err := cpubind.Allowed()
		if err != nil {
			return fmt.Errorf("%w: %s=%q: %w", ErrEnvironment, env.EnvBind, v, err)
		}
		if cfg.bindCPUs, err = cpubind.Resolve(v, cfg.localRank, cfg.localSize, allowed); err != nil {
			return fmt.Errorf("%w: %w", ErrEnvironment, err)
		}
		cfg.sharedProcs = cpubind.SharedProcs(v, cfg.localSize, allowed)
	}
	overrides := []struct {
		name string
		dst  *algo.Algorithm
	}{
		{"ALLREDUCE", &cfg.algorithms.AllReduce}, {"REDUCE", &cfg.algorithms.Reduce},
		{"BROADCAST", &cfg.algorithms.Broadcast}, {"ALLGATHER", &cfg.algorithms.AllGather},
		{"REDUCESCATTER", &cfg.algorithms.ReduceScatter}, {"GATHER", &cfg.algorithms.Gather},
		{"SCATTER", &cfg.algorithms.Scatter}, {"ALLTOALL", &cfg.algorithms.AllToAll},
		{"BARRIER", &cfg.algorithms.Barrier},
	}
	for _, o := range overrides {
		if *o.dst != algo.Auto {
			continue
		}
		if v := e.Get(env.EnvAlgoPrefix + o.name); v != "" {
			a, err := algorithmOf(v)
			if err != nil {
				return fmt.Errorf("%w: %s%s: %w", ErrEnvironment, env.EnvAlgoPrefix, o.name, err)
			}
			*o.dst = a
		}
	}
	if cfg.logger == nil {
		if v := e.Get(env.EnvDebug); v != "" {
			level, on, err := debugLevel(v)
			if err != nil {
				return err
			}
			if on {
				h := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
				cfg.logger = slog.New(h).With("rank", cfg.rank)
			}
		}
	}
	cfg.profile = e.Get(env.EnvProfile)
	return nil
}

// storeAuth reads GOCOMM_STORE_AUTH.
func storeAuth(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "", "1", "true", "on", "yes":
		return true, nil
	case "0", "false", "off", "no":
		return false, nil
	}
	return false, env.Errorf("%s=%q: want 1 (the store rank 0 hosts requires GOCOMM_SECRET's handshake, the default) or 0 (torch ranks share the store)", env.EnvStoreAuth, v)
}

// debugLevel reads GOCOMM_DEBUG.
func debugLevel(v string) (slog.Level, bool, error) {
	switch strings.ToLower(v) {
	case "0", "false", "off", "no":
		return 0, false, nil
	case "1", "true", "on", "yes", "debug", "detail":
		return slog.LevelDebug, true, nil
	case "info":
		return slog.LevelInfo, true, nil
	case "warn", "warning":
		return slog.LevelWarn, true, nil
	case "error":
		return slog.LevelError, true, nil
	}
	return 0, false, env.Errorf("%s=%q: want 1 (debug), info, warn, error or 0 (off)", env.EnvDebug, v)
}

// openStore opens the meeting place Init needs when Options.Store is nil
// and the world has several ranks. The returned store's Close releases
// everything it opened (and, for a file store, removes the file once every
// rank has closed it).
func (cfg *config) openStore(ctx context.Context) (rendezvous.Store, error) {
	r := cfg.rdzv
	fail := func(err error) error {
		return fmt.Errorf("comm: rank %d: rendezvous (%v store at %s, from %s): %w", cfg.rank, r.Kind, r.Addr+r.Path, r.From, err)
	}
	var st rendezvous.Store
	var closers []func() error
	if r.Kind == RendezvousMPI {
		// Every rank learns where rank 0's store will be; from here on
		// it is a TCP rendezvous.
		b := mpiBootstrapper()
		if b == nil {
			return nil, fail(env.Errorf("this build cannot meet through MPI (the %q driver is missing or built without -tags mpi): set %s and %s", mpiDriver, env.EnvMasterAddr, env.EnvMasterPort))
		}
		info, err := b.Bootstrap(ctx, cfg.listenHost)
		if err != nil {
			return nil, fail(err)
		}
		if info.Rank != cfg.rank || info.Size != cfg.size {
			return nil, fail(fmt.Errorf("MPI says rank %d of %d, the environment rank %d of %d", info.Rank, info.Size, cfg.rank, cfg.size))
		}
		r.Kind, r.Addr = RendezvousTCP, net.JoinHostPort(info.MasterAddr, strconv.Itoa(info.MasterPort))
	}
	switch r.Kind {
	case RendezvousTCP:
		addr := r.Addr
		if cfg.rank == 0 {
			addr = r.HostAddr()
		}
		var opts []rendezvous.TCPOption
		if cfg.storeAuth {
			opts = append(opts, rendezvous.WithSecret(cfg.secret))
		}
		if cfg.logger != nil {
			opts = append(opts, rendezvous.WithLogger(cfg.logger))
		}
		tcp, err := rendezvous.NewTCPStore(ctx, addr, cfg.rank == 0, opts...)
		if err != nil {
			return nil, fail(err)
		}
		st = tcp
		cfg.storeLocal = tcp.LocalAddr()
	case RendezvousAgent:
		// torchrun's agent hosts the store: torch cannot authenticate.
		tcp, err := rendezvous.DialTCPStore(ctx, r.Addr)
		if err != nil {
			return nil, fail(err)
		}
		st = tcp
		cfg.storeLocal = tcp.LocalAddr()
	case RendezvousFile:
		fs, err := rendezvous.NewFileStore(r.Path)
		if err != nil {
			return nil, fail(err)
		}
		st = fs
		size, path := int64(cfg.size), r.Path
		closers = append(closers, func() error {
			// The last rank to close removes the file, so that a later
			// job with the same id cannot read this one's keys.
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := fs.Add(cctx, "gocomm/closed", 1)
			if err == nil && n == size {
				if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
			return nil
		})
	case RendezvousEtcd:
		// Every rank is a client; the prefix is the etcd store's own.
		var opts []rendezvous.EtcdOption
		if r.LeaseTTL > 0 {
			opts = append(opts, rendezvous.WithLeaseTTL(r.LeaseTTL))
		}
		es, err := rendezvous.NewEtcdStore(ctx, r.Endpoints, r.Prefix, opts...)
		if err != nil {
			return nil, fail(err)
		}
		st, r.Prefix = es, ""
		size := int64(cfg.size)
		closers = append(closers, func() error {
			// The last rank to close removes the job's keys, so that a
			// later job given the same prefix starts afresh (after a
			// crash they expire with the job's lease instead).
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if n, err := es.Add(cctx, "gocomm/closed", 1); err == nil && n == size {
				return es.RemoveAll(cctx)
			}
			return nil
		})
	default:
		return nil, fail(env.Errorf("no meeting place for a world of %d ranks: set %s and %s", cfg.size, env.EnvMasterAddr, env.EnvMasterPort))
	}
	closers = append(closers, st.Close)
	if r.Prefix != "" {
		st = rendezvous.NewPrefixStore(r.Prefix, st)
		closers = append([]func() error{st.Close}, closers...)
	}
	if cfg.logger != nil {
		cfg.logger.Debug("comm: rendezvous", "launcher", cfg.launcher, "kind", r.Kind, "at", r.Addr+r.Path, "prefix", r.Prefix, "from", r.From)
	}
	return &jobStore{Store: st, closers: closers}, nil
}

// jobStore is the store Init opened; Close releases every layer of it.
type jobStore struct {
	rendezvous.Store
	closers []func() error
	once    sync.Once
	err     error
}

func (s *jobStore) Close() error {
	s.once.Do(func() {
		var errs []error
		for _, c := range s.closers {
			errs = append(errs, c())
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}
