//go:build gocomm_portable

package transport

import "testing"

// TestPortableBuild: under -tags gocomm_portable this package has what a
// build outside Linux has: no shared-memory rings (so no futexes and no
// process_vm_readv) and connection readers that block instead of polling.
func TestPortableBuild(t *testing.T) {
	if shmSupported {
		t.Error("shared-memory rings are built in: shm_linux.go must be left out under gocomm_portable")
	}
	if pollingReads {
		t.Error("polling reads are built in: tcp_poll_linux.go must be left out under gocomm_portable")
	}
}
