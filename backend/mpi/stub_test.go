//go:build !mpi || !cgo

package mpi_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gocomm/comm/backend"
	"github.com/gocomm/comm/backend/mpi"
)

// Without -tags mpi the drivers exist and say how to get the real thing.
func TestStubSaysHowToBuild(t *testing.T) {
	for _, name := range []string{mpi.Name, mpi.FunneledName} {
		_, err := backend.Open(context.Background(), name, backend.Config{Rank: 0, Size: 1})
		if !errors.Is(err, mpi.ErrUnavailable) || !strings.Contains(err.Error(), "-tags mpi") {
			t.Errorf("Open(%q): got %v, want ErrUnavailable explaining -tags mpi", name, err)
		}
	}
	if _, err := mpi.Bootstrap(context.Background(), ""); !errors.Is(err, mpi.ErrUnavailable) {
		t.Errorf("Bootstrap: got %v, want ErrUnavailable", err)
	}
	// comm.Init finds the bootstrap through the registry: the stub is
	// there, and says it cannot.
	d, _ := backend.Lookup(mpi.Name)
	b, ok := d.(backend.Bootstrapper)
	if !ok {
		t.Fatalf("the %q driver (%T) is not a backend.Bootstrapper", mpi.Name, d)
	}
	if b.Available() {
		t.Error("the stub's Available() is true")
	}
	if _, err := b.Bootstrap(context.Background(), ""); !errors.Is(err, mpi.ErrUnavailable) {
		t.Errorf("Driver.Bootstrap: got %v, want ErrUnavailable", err)
	}
}
