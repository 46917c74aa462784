// Package rendezvous is the key-value Store through which the ranks of a
// job find each other: each publishes the address of its data listener,
// rank 0 publishes ids, all count arrivals and wait for each other. It is
// what torch.distributed's Store is, with the same semantics, and its TCP
// store speaks PyTorch's TCPStore protocol, so gocomm ranks can rendezvous
// through a store hosted by torch (torchrun's agent store) and torch ranks
// through one hosted by gocomm.
//
// # Stores
//
//   - MemStore (NewMemStore): in one process, for threads and tests.
//   - NewPrefixStore: a namespace inside another store (key k is stored as
//     prefix + "/" + k), as torch's PrefixStore.
//   - FileStore (NewFileStore): a file on a shared file system, in torch's
//     FileStore format, for jobs without a reachable rank 0 port.
//   - TCPStore (DialTCPStore, NewTCPStore) and TCPStoreServer
//     (ListenTCPStore): rank 0 (or the launcher) hosts the server at
//     MASTER_ADDR:MASTER_PORT and every rank is a client.
//   - EtcdStore (NewEtcdStore): an etcd cluster keeps the keys under a
//     prefix naming the job and every rank is a client, so no rank's loss
//     takes the store with it. Keys live on leases (see EtcdStore): the
//     job's expire after its last rank, a rank's own (SetLeased) after it.
//
// Typical use, on every rank:
//
//	st, err := rendezvous.NewTCPStore(ctx, "10.0.0.1:29500", rank == 0)
//	if err != nil { ... }
//	defer st.Close()
//	st.Set(ctx, fmt.Sprintf("addr/%d", rank), []byte(myAddr))
//	peer, err := st.Get(ctx, fmt.Sprintf("addr/%d", (rank+1)%size)) // blocks until set
//	n, err := st.Add(ctx, "joined", 1)                               // n-th arrival
//
// All stores are safe for concurrent use; every blocking call returns when
// its ctx is done or the store is closed. Errors are *Error values (op,
// keys, store) wrapping the sentinels ErrStoreClosed, ErrBadCounter,
// ErrTooLarge, ErrMasterUnreachable, ErrConnectionLost, ErrProtocol,
// ErrLeaseExpired (etcd) or the context's error.
//
// # The TCP store protocol
//
// This is PyTorch's TCPStore protocol (torch/csrc/distributed/c10d), in both
// of its generations: checked byte for byte against torch 1.13 running here,
// and against torch 2.x's source (golden bytes written from it; the README
// names the commits read). Integers are little-endian (torch sends
// them in native order). A string or byte vector is a uint64 length and the
// bytes. A request is a one-byte QueryType and its arguments; the server
// answers some requests and serves each connection's requests in order.
//
//	query        arguments                       answer
//	SET          key, value                      none
//	COMPARE_SET  key, expected, desired          value (see Store.CompareAndSet)
//	GET          key                             value (key must exist: clients WAIT first)
//	ADD          key, int64 delta                int64 new value (stored as decimal ASCII)
//	CHECK        uint64 n, n keys                byte READY=0 | NOT_READY=1
//	WAIT         uint64 n, n keys                byte STOP_WAITING=0 once all exist
//	GETNUMKEYS   -                               int64
//	DELETE_KEY   key                             int64 number deleted (0 or 1)
//
// Clients prefix every key with "/" (torch's keyPrefix_); torch's own
// bookkeeping keys (such as "init/", counted by a master created with a
// world size) are not prefixed. A torch client's get is WAIT then GET on
// the same connection.
//
// Torch 1.x (1.13 is what Debian ships) numbers the queries SET=0,
// COMPARE_SET=1, GET=2, ADD=3, CHECK=4, WAIT=5, GETNUMKEYS=6, WATCH_KEY=7,
// DELETE_KEY=8 and has no handshake. The 2.0-era source adds APPEND=9,
// MULTI_GET=10, MULTI_SET=11, CANCEL_WAIT=12 to that numbering, still
// without a handshake: to a client it is the 1.x generation. Torch 2.x with
// the handshake differs:
//
//   - every connection first sends VALIDATE followed by the uint32 magic
//     0x3C85F7CE (no answer), then (torch's own client) PING; a connection
//     that does not open with VALIDATE is closed by the classic server
//     (TCPStoreBackend.cpp) and left unanswered by the libuv one
//     (TCPStoreLibUvBackend.cpp);
//   - the numbering is VALIDATE=0, SET=1, COMPARE_SET=2, GET=3, ADD=4,
//     CHECK=5, WAIT=6, GETNUMKEYS=7, DELETE_KEY=8, APPEND=9, MULTI_GET=10,
//     MULTI_SET=11, CANCEL_WAIT=12, PING=13; WATCH_KEY is gone;
//   - APPEND key, value appends to the value (no answer); MULTI_GET n, keys
//     answers n values; MULTI_SET n, (key, value)*n (no answer); PING
//     uint32 nonce answers the nonce;
//   - a client whose wait timed out sends CANCEL_WAIT; the server answers
//     WAIT_CANCELED=1, possibly after a STOP_WAITING that crossed it;
//   - since 2.4 the server runs on libuv by default (same protocol).
//
// Some 2.x development snapshots prefixed every query with a magic number
// instead of the VALIDATE handshake; that variant is not supported, nor are
// the queue queries of recent releases.
//
// TCPStoreServer accepts both generations, telling them apart per
// connection by its first bytes: a 2.x connection starts with 0x00 and the
// magic, which for a 1.x SET would be an impossible key length. It does not
// support torch 1.x's WATCH_KEY (watch callbacks; not exposed to Python):
// such a connection is closed.
//
// Waits are kept per connection exactly as torch's server keeps them, which
// matters to a torch 1.x client whose wait timed out: it has no
// CANCEL_WAIT, keeps its connection and goes on. A WAIT that has to wait
// registers its missing keys and sets the connection's count of awaited
// keys, replacing the count an abandoned WAIT left; each set of a
// registered key decrements the count, and the decrement that reaches zero
// sends STOP_WAITING (below zero nothing is sent). So a retried wait is
// released when its own keys appear, and an abandoned wait's key appearing
// while the connection waits for nothing sends a STOP_WAITING early, which
// the client's next WAIT takes as its answer, as with torch's server. Every
// other request on the connection is answered as usual. A closed
// connection's registrations, or a 2.x CANCEL_WAIT's, are dropped.
//
// TCPStore, our client, speaks either generation. GOCOMM_TORCH_STORE=1 or 2
// forces one (a server that turns out to speak the other is reported at
// dial, wrapping ErrProtocol); unset or "auto", the first connection
// probes, safely for either kind of server:
//
//   - it sends torch 1.x's CHECK of no keys, which every 1.x server (and
//     ours) answers READY at once: 1.x. Its first byte (4) is no VALIDATE,
//     so a 2.x server refuses it without acting on it: the classic server
//     closes the connection, the libuv one stays silent (probeSilence, 1 s,
//     is how long the probe waits for an answer);
//   - refused, it opens a new connection with VALIDATE and PING: the nonce
//     echoed means 2.x. The nonce is chosen so that, read by a 1.x server
//     as a SET, the key length is over 2^63 and fails at once;
//   - a classic 2.x server older than PING closes that connection too: a
//     third connection confirms VALIDATE with a 2.x CHECK of no keys
//     instead (only after a closed 1.x probe, which no 1.x server does);
//     silence and then a closed PING make it ask the 1.x question again,
//     patiently, in case the server is a slow 1.x one. That PING-less
//     opening never goes to a server that might be 1.x (with
//     GOCOMM_TORCH_STORE=2 too, a refused PING runs the probe first; the
//     one exception: a pre-PING 2.x server this process found, replaced
//     at the same address by a 1.x one):
//     torch 1.13 reads it as a SET of a 22 GB key and waits for the key,
//     stalling every client.
//
// What the probe found is remembered per server address for the life of
// the process, so later connections (a new wait connection, a redial) and
// later stores skip it. Every 2.x connection opens with VALIDATE and PING,
// as torch's client does. With WithSecret the server is ours (it
// authenticated), which speaks both: the client speaks 2.x without
// probing. TorchProtocol reports the generation chosen.
//
// The client sends requests one at a time over a main connection, and follows each SET with a CHECK of no keys
// (answered READY by every server) so that Set returns once the server has
// applied it. Get is CHECK then GET on the main connection; while the key
// is missing it sends WAIT on a separate wait connection (kept for reuse),
// so other goroutines keep using the store. When a ctx ends a wait, a 2.x
// client sends CANCEL_WAIT on its connection and reads WAIT_CANCELED
// (after a STOP_WAITING that crossed it), as torch's client does, and keeps
// the connection for the next wait; a 1.x client, which has no
// CANCEL_WAIT, closes it (servers forget the waits of a closed connection)
// and dials a new one for the next wait, so a STOP_WAITING owed to an
// abandoned wait never reaches it. When a ctx ends any other request, its
// connection is closed and redialed. The client checks the keys again
// after every STOP_WAITING before a Wait or Get returns. MultiGet and
// MultiSet are torch's multi_get and multi_set: one MULTI_GET or MULTI_SET
// on 2.x, one GET or SET per key on 1.x.
//
// # Authentication
//
// With WithSecret (comm.Init passes GOCOMM_SECRET when rank 0 hosts the
// store), every connection first runs an HMAC-SHA256 challenge-response
// with the secret (see WithSecret; the opener starts with "GCSA", no query
// of either dialect), proving each side to the other; the server closes
// and logs (WithLogger, rate-limited) a connection that does not, and
// serves the others. Torch cannot authenticate, so the secret is for jobs
// whose store only gocomm ranks use: comm.Init does not authenticate to a
// store torchrun's agent hosts, and GOCOMM_STORE_AUTH=0 turns the
// requirement off when torch ranks share a store rank 0 hosts. A connection
// must finish the handshake within the auth timeout (WithAuthTimeout), so a
// half-open or slow-drip stranger holds nothing for long.
//
// Limits: the server closes a connection that sends a key over MaxKeyLen,
// a value over MaxValueLen, more than MaxKeys keys in one query, an unknown
// query, a GET of a missing key or an ADD to a value that is not a decimal
// int64, and keeps serving the others (Refused counts them). It allocates
// a value as its bytes arrive (4 KiB, then at most double what arrived),
// never on the strength of a length alone.
//
// # The file store format
//
// The file is torch's FileStore log: records [uint32 key length][key]
// [uint32 value length][value], little-endian, appended under an exclusive
// flock(2) and replayed by readers under a shared one. A set appends
// ("/" + key, value); a delete appends ("-/" + key, empty); other keys
// (torch's "cleanup/" counter) are ignored. Readers poll every 10 ms while
// blocked (inotify does not work on NFS). Flock is needed, so the file
// store works on Linux and the BSDs, not on Windows.
package rendezvous
