// Package clock is a monotonic clock for timestamps on hot paths: the
// flight recorder's enter and exit times and the pacing of wait loops,
// read a few times per small collective.
//
// time.Since costs 60-300 ns on some virtual machines (a kvm-clock read
// through the vDSO), as much as a whole 8-byte exchange between two
// ranks over shared memory. Where the CPU has an invariant time-stamp
// counter (amd64, CPUID leaf 0x80000007 EDX bit 8), Nanos reads the
// counter (RDTSC, about 10-25 ns) and scales it by a rate measured
// against the runtime's monotonic clock; elsewhere, and until the rate
// is known (the first 2 ms after the first call), it is time.Since.
//
// The rate is measured again at doubling intervals up to once a second,
// each time over everything since the first call, so the error shrinks
// as the process runs; a correction may move the clock back by the error
// it removes (microseconds at most). Nanos is for diagnostics and
// pacing, never for deadlines: those use package time.
//
// The build tag gocomm_portable leaves the counter out.
package clock
