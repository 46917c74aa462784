package comm_test

import (
	"errors"
	"testing"

	"github.com/gocomm/comm"
)

// TestStartFunc: the Work is done when fn returns and carries its error.
func TestStartFunc(t *testing.T) {
	release := make(chan struct{})
	boom := errors.New("boom")
	w := comm.StartFunc(func() error { <-release; return boom })
	select {
	case <-w.Done():
		t.Fatal("done before fn returned")
	default:
	}
	if w.Err() != nil || w.Source() != -1 {
		t.Fatalf("before completion: Err %v, Source %d", w.Err(), w.Source())
	}
	close(release)
	if err := w.Wait(); !errors.Is(err, boom) {
		t.Fatalf("Wait = %v, want fn's error", err)
	}
	if !errors.Is(w.Err(), boom) || w.Source() != -1 {
		t.Fatalf("after completion: Err %v, Source %d", w.Err(), w.Source())
	}
	if err := comm.StartFunc(func() error { return nil }).Wait(); err != nil {
		t.Fatal(err)
	}
}
