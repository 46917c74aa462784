// Package bufpool recycles large temporary buffers by power-of-two size
// class, for the native engine's work and scratch buffers and the
// transports' buffers of unexpected messages.
//
// Data flow. Pool.Get hands out a buffer of the asked size from its
// size class's pool (or a new one); Pool.Put returns it for reuse. A buffer
// belongs to whoever got it until it is put back, and must not be used
// after that.
//
// Who may import it: the native engine and the transports (internal to the
// module). It imports only internal/kernel.
package bufpool
