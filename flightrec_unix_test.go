//go:build unix

package comm_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
)

// SIGUSR1 dumps every rank's flight record into the directory asked for.
func TestFlightRecorderSignal(t *testing.T) {
	dir := t.TempDir()
	w := tcpWorld(t, 2, comm.Options{Timeout: time.Minute, FlightRecorderSignal: dir})
	ctx := testkit.Context(t, time.Minute)
	testkit.NoErrors(t, testkit.OnEveryRank(w, func(r int, c *comm.Comm) error { return comm.Barrier(ctx, c) }))
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	for r := range w {
		path := filepath.Join(dir, "gocomm-flightrec-rank"+string(rune('0'+r))+".json")
		var data []byte
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if d, err := os.ReadFile(path); err == nil && json.Valid(d) {
				data = d
				break
			}
		}
		var rec comm.FlightRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatalf("rank %d: no dump at %s: %v", r, path, err)
		}
		if rec.Rank != r || rec.Comms[0].Recent[0].Op != "barrier" {
			t.Errorf("rank %d dumped %+v", r, rec)
		}
	}
}
