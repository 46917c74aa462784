//go:build !mpi || !cgo

package mpi_test

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// TestMPIBackendBuiltWithTag runs this package's real tests (cgo, -tags mpi:
// the conformance suite under mpirun -np 1..4) from the default build, so
// that `go test ./...` is the whole suite. It needs an MPI to compile
// against and to launch with; without one it says so and skips.
func TestMPIBackendBuiltWithTag(t *testing.T) {
	if os.Getenv("GOCOMM_MPI_NESTED") != "" {
		t.Skip("already inside the -tags mpi run")
	}
	for _, tool := range []string{"mpirun", "pkg-config", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the mpi backend's tests need %s on PATH (apt-get install openmpi-bin libopenmpi-dev pkg-config gcc)", tool)
		}
	}
	if err := exec.Command("pkg-config", "--exists", "ompi-c").Run(); err != nil {
		t.Skip("the mpi backend's tests need Open MPI's headers (apt-get install libopenmpi-dev): pkg-config ompi-c not found")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("running the -tags mpi tests needs the go command on PATH: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	args := []string{"test", "-tags", "mpi", "-count=1", "-timeout", "14m"}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, goCmd, append(args, ".")...)
	cmd.Env = append(os.Environ(), "GOCOMM_MPI_NESTED=1", "CGO_ENABLED=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %v (GOOS=%s): %v\n%s", args, runtime.GOOS, err, out)
	}
	t.Logf("go %v:\n%s", args, out)
}
