//go:build !linux

package netns

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
)

// ErrClosed is returned by Host methods called after Network.Close.
var ErrClosed = errors.New("comm: netns: network closed")

// Available reports that network namespaces exist only on Linux.
func Available() error {
	return fmt.Errorf("%w: network namespaces need Linux, this is %s", ErrUnavailable, runtime.GOOS)
}

// New fails with the error of Available: namespaces need Linux.
func New(opts Options) (*Network, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return nil, Available()
}

// Close does nothing: no Network is ever made outside Linux.
func (n *Network) Close() error { return nil }

// Run fails with the error of Available.
func (n *Network) Run(ctx context.Context, host int, name string, args ...string) ([]byte, error) {
	return nil, Available()
}

// Command returns a command that fails to start: namespaces need Linux.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Err = Available()
	return cmd
}

// SetLink fails with the error of Available.
func (h *Host) SetLink(up bool) error { return Available() }

// Shape fails with the error of Available.
func (h *Host) Shape(rate string) error { return Available() }

// AddDummy fails with the error of Available.
func (h *Host) AddDummy(name, cidr string) error { return Available() }

// SetHosts fails with the error of Available.
func (h *Host) SetHosts(names map[string]string) error { return Available() }
