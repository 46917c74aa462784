package netns

import "testing"

// ForTest builds a Network for tb and removes it when tb ends; where
// namespaces cannot be made it skips tb, saying why.
func ForTest(tb testing.TB, opts Options) *Network {
	tb.Helper()
	if err := Available(); err != nil {
		tb.Skipf("no simulated hosts here: %v", err)
	}
	nw, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := nw.Close(); err != nil {
			tb.Errorf("removing the simulated hosts: %v", err)
		}
	})
	return nw
}
