package comm_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/cpubind"
)

// TestBindAuto starts two ranks with GOCOMM_BIND=auto, as commrun does,
// and checks that every thread of each runs on that rank's own half of
// the CPUs (or, on a machine with one CPU, that nothing was bound).
func TestBindAuto(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU binding is Linux only")
	}
	allowed, err := cpubind.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	errs, outs := launch(t, 2, "bind-report", time.Minute, "GOCOMM_BIND=auto")
	for r := range 2 {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v\n%s", r, errs[r], outs[r])
		}
		want := cpubind.Block(allowed, r, 2)
		if want == nil {
			want = allowed
		}
		line := fmt.Sprintf("threads on %s\n", cpubind.Format(want))
		if strings.Count(outs[r], "threads on ") != 1 || !strings.Contains(outs[r], line) {
			t.Errorf("rank %d: want every thread on %s, got:\n%s", r, cpubind.Format(want), outs[r])
		}
	}
}

func TestBindInvalid(t *testing.T) {
	getenv := func(k string) string {
		if k == comm.EnvBind {
			return "cores"
		}
		return ""
	}
	_, err := comm.Init(t.Context(), comm.Options{Rank: 0, Size: 1, Getenv: getenv})
	if !errors.Is(err, comm.ErrEnvironment) || !strings.Contains(err.Error(), "GOCOMM_BIND") {
		t.Fatalf("Init with GOCOMM_BIND=cores: %v, want an environment error naming GOCOMM_BIND", err)
	}
	t.Log(err)
}
