package transport

import "time"

// defaultReadSpin is TCPOptions.ReadSpin's default: 8-byte one-way
// latency between two processes over loopback, median, 47 us when the
// reader parks at once, 9 us when it polls (BenchmarkSHMProcess). Builds
// without polling reads (pollingReads false) ignore it.
const defaultReadSpin = 200 * time.Microsecond
