//go:build !gocomm_portable

package clock

// haveTSC says the time-stamp counter is invariant: it ticks at one rate
// in every power state and on every core.
var haveTSC = invariantTSC()

// rdtsc reads the time-stamp counter.
func rdtsc() uint64

// cpuid runs CPUID for leaf eax, subleaf ecx.
func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

func invariantTSC() bool {
	maxExt, _, _, _ := cpuid(0x80000000, 0)
	if maxExt < 0x80000007 {
		return false
	}
	_, _, _, edx := cpuid(0x80000007, 0)
	return edx&(1<<8) != 0
}
