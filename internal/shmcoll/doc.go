// Package shmcoll runs the collectives of a world whose ranks all map one
// host's shared-memory segment, without messages: the board (board.go)
// for small collectives, where every rank posts its contribution in its
// own slot and reads the others' in place; the stage (stage.go,
// stage_copy.go) for larger all-reduces, broadcasts, all-to-alls,
// all-gathers and reduce-scatters, in chunks through every rank's block;
// and shared allocations (shared.go), memory every rank maps, whose
// all-reduces read and write every rank's buffers where they are.
//
// The transport owns the segment: it sets aside the areas this package
// lays out (Areas, transport.SHMOptions.Areas), and gives access to them
// with the mapping's lock, failure, peer liveness and futex sleeps
// (transport.Areas). The native backend decides which collectives run
// here, numbers them alike on every rank and runs them one at a time
// (New, Board).
package shmcoll
