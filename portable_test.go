//go:build !gocomm_portable

package comm_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestPortableBuildWithTag runs the portable build's tests (-tags
// gocomm_portable: no shared memory, no polling reads, no assembly
// kernels; what macOS, Windows and FreeBSD get) from the default build, so
// that `go test ./...` on Linux tests the code other platforms run: the
// conformance quick suite over TCP and the hybrid transport
// (TestPortableBuild here), and the transport's and kernels' checks that
// the tag took their Linux paths out.
func TestPortableBuildWithTag(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("running the -tags gocomm_portable tests needs the go command on PATH: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := []string{"test", "-tags", "gocomm_portable", "-count=1", "-timeout", "9m", "-run", "^TestPortableBuild$"}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, ".", "./internal/transport", "./internal/kernel", "./internal/onebitkernel")
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}
	t.Logf("go %v:\n%s", args, out)
}
