//go:build !linux || gocomm_portable

package transport

import (
	"errors"
	"fmt"
	"syscall"
)

var errCongestionHere = errors.New("TCP congestion control is chosen on Linux only (without -tags gocomm_portable)")

func setCongestion(rc syscall.RawConn, name string) error { return errCongestionHere }

// CheckCongestion says whether name is a valid TCPOptions.Congestion:
// here, only auto and system.
func CheckCongestion(name string) error {
	if !congestionNamed(name) {
		return nil
	}
	return fmt.Errorf("comm: transport: TCP congestion control %q: %w", name, errCongestionHere)
}
