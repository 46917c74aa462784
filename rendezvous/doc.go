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
// ErrTooLarge, ErrMasterUnreachable, ErrConnectionLost, ErrProtocol or the
// context's error.
//
// # The TCP store protocol
//
// This is PyTorch's TCPStore protocol (torch/csrc/distributed/c10d), checked
// byte for byte against torch 1.13. Integers are little-endian (torch sends
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
// DELETE_KEY=8 and has no handshake. Torch 2.x differs:
//
//   - every connection first sends VALIDATE followed by the uint32 magic
//     0x3C85F7CE (no answer); the server drops connections that do not;
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
// TCPStore, our client, speaks the 1.x protocol, so it works with torch 1.x
// servers and with ours but not with a torch 2.x server (which drops a
// connection that does not open with VALIDATE). It sends requests one at a
// time over a main connection, and follows each SET with a CHECK of no keys
// (answered READY by every server) so that Set returns once the server has
// applied it. Get is CHECK then GET on the main connection; while the key
// is missing it sends WAIT on a separate wait connection (kept for reuse),
// so other goroutines keep using the store. When a ctx ends a request, the
// client closes that connection instead of cancelling (1.x has no
// CANCEL_WAIT; servers forget the waits of a closed connection) and dials
// a new one for the next request, so a STOP_WAITING owed to an abandoned
// wait never reaches it; it also checks the keys again after every
// STOP_WAITING before a Wait or Get returns.
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
