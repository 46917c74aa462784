// Package core is the vocabulary every layer of gocomm shares, as etcd's
// raftpb is raft's: element types (DType), reduction operators (Op),
// operation kinds (Kind), schedule families (Algorithm), the signature
// every message carries (Signature), the native transport's modes
// (TransportMode), and the error values and types a failed operation
// returns (OpError, MismatchError, LengthError, PeerError, AbortError,
// RemoteAbortError, BarrierError and the Err* sentinels).
//
// It imports nothing of gocomm, and every other package may import it:
// algo, transport, internal/kernel and the backends speak these words
// without importing one another upward. The comm package re-exports the
// names users need (comm.Float32, comm.ErrMismatch, ...); backend,
// transport and algo keep their old names as aliases.
//
// The numbering of DType, Op, Kind and Algorithm is part of the wire
// format and of profiles: append only.
package core
