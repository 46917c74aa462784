//go:build !amd64 || gocomm_portable

package clock

const haveTSC = false

func rdtsc() uint64 { return 0 }
