// Package transport moves messages between the ranks of one world: the
// byte layer under the native backend. It holds connections, shared-memory
// segments and their rings, framing, matching and peer liveness; it runs
// no collective (those are package algo's schedules, run by
// backend/native, and the shared-memory collectives of internal/shmcoll).
//
// An Endpoint sends a message to a peer and receives messages matched by
// (communicator, sequence number, tag, sender). The implementations share
// one mailbox, so they behave the same:
//
//   - TCP (ConnectTCP): one connection per pair of ranks, addresses
//     exchanged through a rendezvous store, an authenticated handshake,
//     framed messages with bounded sizes, one reader goroutine per
//     connection that reads payloads straight into posted receive
//     buffers (or hands them to a reducing receive's sink piece by
//     piece, SinkReceiver) and polls an empty socket briefly before it
//     sleeps (TCPOptions.ReadSpin); with more ranks than cores the readers
//     sleep at once and a receive instead yields the CPU until its peer's
//     bytes are in the socket (TCP.crowd);
//   - Hybrid (ConnectHybrid, ConnectSHM): ranks on one host, found by host
//     identity (HostIdentity: host name and boot id, or a given HostID),
//     map one segment with a single-producer ring per ordered pair; a
//     receive polls the rings itself (spin, then yield, then a futex
//     sleep, so that more ranks than cores do not collapse), a background
//     drainer empties rings whose producer waits for room; a message too
//     large for its ring streams through it, written as room appears by
//     the receive the sender's goroutine runs meanwhile (a started send,
//     SendStarter) or by the send's own wait; with more ranks than CPUs,
//     messages of 256 KiB and more are instead copied once, by the
//     receiver, straight out of the sender's memory (process_vm_readv,
//     where the kernel lets the ranks read each other: probed at set-up);
//     peers on other hosts go over TCP. The native backend's default
//     (TransportAuto). When every rank of the world is on the host, the
//     segment also sets aside the areas that internal/shmcoll's
//     collectives ask for (SHMOptions.Areas) and hands them out with
//     the endpoint's lock, failure and sleep (Hybrid.Areas, Areas);
//   - Inproc (NewInprocWorld): all ranks in one process, for tests.
//
// Matching. Per key (Comm, Seq, Tag) and sender, messages are delivered in
// the order they were sent. A receive posted before its message arrives
// gets the payload written directly into its buffer; a message that
// arrives first is queued (in a recycled buffer of its own, up to 64 MiB:
// fresh memory page-faults on first touch) and copied at receive time.
// Every message carries the sender's Signature; a receive fails with
// *MismatchError if the matched message, or any message or receive with
// the same (Comm, Seq != 0), disagrees, and with *LengthError if the
// message's length differs from the buffer's (UpToReceiver.RecvUpTo
// takes a shorter one and returns its length). The mailbox that does this
// is built of parts, one file each: the matching queues
// (mailbox_match.go), their free lists (mailbox_spares.go), the peers'
// departures (mailbox_liveness.go) and the terminal failure
// (mailbox_failure.go).
//
// Failures. A ctx that ends fails only that call. A peer whose connection
// breaks without a goodbye aborts the endpoint: every pending and later
// operation fails with an error matching both ErrAborted and ErrPeerLost
// that holds a *PeerError naming the rank. A peer that closes (goodbye)
// fails only the receives it alone could serve and sends to it, with
// ErrPeerClosed. Abort fails everything locally and aborts every peer with
// a *RemoteAbortError. Close fails pending operations with ErrClosed and
// waits for every goroutine the endpoint started. Every endpoint is also a
// WaitNotifier: a rank tells its peers whom it has long been waiting for
// (a waiting frame), so that a rank whose own wait times out can name the
// rank at the end of that chain; and a FailureSignal (Failed).
//
// Platforms. Shared memory (mmap, futexes, process_vm_readv) and polling
// reads are Linux's (shm_linux.go, tcp_poll_linux.go). Other platforms,
// and Linux built with -tags gocomm_portable, get the portable fallback:
// TCP read with plain blocking reads, a Hybrid endpoint that reaches every
// peer over TCP, and TransportSHM an error that says so.
//
// Wire format: see frame.go (frames) and handshake.go (handshake).
package transport
