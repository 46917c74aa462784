package rendezvous

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Interoperability with real PyTorch (Debian's python3-torch, 1.13). These
// tests run whenever /usr/bin/python3 can import torch.distributed.

const python = "/usr/bin/python3"

var torchCheck = sync.OnceValue(func() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-c", "import torch.distributed as d; assert d.is_available(); print(__import__('torch').__version__)").CombinedOutput()
	if err != nil {
		return errors.New(strings.TrimSpace(string(out)) + ": " + err.Error())
	}
	return nil
})

// torchCtx bounds a test that waits for a Python process: its start-up
// (importing torch) counts, which takes tens of seconds on a loaded
// machine, so it gets what startPython gives the process.
func torchCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func requireTorch(t *testing.T) {
	t.Helper()
	if err := torchCheck(); err != nil {
		t.Skipf("torch is not importable by %s (install python3-torch to run this test): %v", python, err)
	}
}

// startPython runs script with args; its stdout is returned as a line
// reader. The process is killed when the test ends.
func startPython(t *testing.T, script string, args ...string) (*bufio.Reader, func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	cmd := exec.CommandContext(ctx, python, append([]string{"-c", script}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	var once sync.Once
	var waitErr error
	wait := func() error {
		once.Do(func() {
			waitErr = cmd.Wait()
			cancel()
			if waitErr != nil {
				waitErr = errors.New(waitErr.Error() + "; stderr:\n" + stderr.String())
			}
		})
		return waitErr
	}
	t.Cleanup(func() {
		cancel()
		wait()
	})
	return bufio.NewReader(stdout), wait
}

func readLine(t *testing.T, r *bufio.Reader, wait func() error) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading python's output: %v (python: %v)", err, wait())
	}
	return strings.TrimSpace(line)
}

const torchClientScript = `
import sys, json, datetime
import torch.distributed as d
s = d.TCPStore(sys.argv[1], int(sys.argv[2]), is_master=False, timeout=datetime.timedelta(seconds=30))
out = {}
s.set("py/hello", b"from python")
out["go_value"] = s.get("go/hello").decode()
out["add1"] = s.add("cnt", 3)
out["add2"] = s.add("cnt", 4)
out["cas_create"] = s.compare_set("cas", b"", b"x").decode()
out["cas_swap"] = s.compare_set("cas", b"x", b"y").decode()
out["cas_mismatch"] = s.compare_set("cas", b"zz", b"w").decode()
out["cas_missing"] = s.compare_set("cas-missing", b"e", b"w").decode()
s.wait(["go/late"])
out["late"] = s.get("go/late").decode()
out["go_counter"] = s.add("go/cnt", 0)
s.set("py/tmp", b"t")
out["deleted"] = s.delete_key("py/tmp")
out["deleted_again"] = s.delete_key("py/tmp")
out["num_keys"] = s.num_keys()
try:
    s.wait(["never"], datetime.timedelta(milliseconds=200))
    out["wait_timeout"] = "no timeout"
except Exception as e:
    out["wait_timeout"] = str(e)
print(json.dumps(out), flush=True)
`

// TestTorchClientGoServer: torch 1.13's TCPStore client against our server.
func TestTorchClientGoServer(t *testing.T) {
	t.Parallel()
	requireTorch(t)
	ctx := torchCtx(t)
	srv := startServer(t)
	st, err := DialTCPStore(ctx, srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mustSet(t, st, "go/hello", "from go")
	if _, err := st.Add(ctx, "go/cnt", 11); err != nil {
		t.Fatal(err)
	}

	host, port, _ := strings.Cut(srv.Addr().String(), ":")
	out, wait := startPython(t, torchClientScript, host, port)
	v, err := st.Get(ctx, "py/hello") // blocks until python sets it
	if err != nil || string(v) != "from python" {
		t.Fatalf("Get(py/hello) = %q, %v (python: %v)", v, err, wait())
	}
	mustSet(t, st, "go/late", "late")

	var got map[string]any
	line := readLine(t, out, wait)
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("python printed %q: %v", line, err)
	}
	if err := wait(); err != nil {
		t.Fatalf("python: %v", err)
	}
	want := map[string]any{
		"go_value": "from go", "add1": 3.0, "add2": 7.0,
		"cas_create": "x", "cas_swap": "y", "cas_mismatch": "y", "cas_missing": "e",
		"late": "late", "go_counter": 11.0, "deleted": true, "deleted_again": false,
		// go/hello, go/cnt, py/hello, cnt, cas, go/late
		"num_keys": 6.0,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("python saw %s = %v, want %v", k, got[k], w)
		}
	}
	if s, _ := got["wait_timeout"].(string); !strings.Contains(s, "imeout") {
		t.Errorf("python's wait on a missing key: %q, want a timeout", s)
	}
	wantValue(t, st, "cnt", "7")
	wantValue(t, st, "cas", "y")
	if ok, err := st.Check(ctx, "cas-missing", "py/tmp"); err != nil || ok {
		t.Errorf("Check(cas-missing, py/tmp) = %v, %v; want false", ok, err)
	}
}

const torchMasterScript = `
import sys, time, datetime
import torch.distributed as d
s = d.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=30))
print(s.port, flush=True)
s.set("py/hello", b"from python")
s.wait(["go/hello"])
hello = s.get("go/hello").decode()
time.sleep(0.2)
s.set("py/late", b"late")
s.wait(["go/done"])
print(hello, s.get("go/cas").decode(), s.add("go/cnt", 0), s.num_keys(), flush=True)
`

// TestGoClientTorchServer: our client against torch 1.13's TCPStore server.
func TestGoClientTorchServer(t *testing.T) {
	t.Parallel()
	requireTorch(t)
	ctx := torchCtx(t)
	out, wait := startPython(t, torchMasterScript)
	port := readLine(t, out, wait)
	if _, err := strconv.Atoi(port); err != nil {
		t.Fatalf("python printed %q, not a port", port)
	}
	st, err := DialTCPStore(ctx, "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	wantValue(t, st, "py/hello", "from python")
	late := asyncGet(ctx, st, "py/late") // set by python only after go/hello
	notYet(t, late, "Get(py/late)")
	mustSet(t, st, "go/hello", "from go")
	if r := within(t, late, 10*time.Second, "Get(py/late)"); r.err != nil || string(r.v) != "late" {
		t.Fatalf("Get(py/late) = %q, %v", r.v, r.err)
	}

	for _, step := range []struct{ delta, want int64 }{{5, 5}, {2, 7}, {-10, -3}} {
		if n, err := st.Add(ctx, "go/cnt", step.delta); err != nil || n != step.want {
			t.Fatalf("Add(go/cnt, %d) = %d, %v; want %d", step.delta, n, err, step.want)
		}
	}
	cas := func(expected, desired, want string) {
		t.Helper()
		if v, err := st.CompareAndSet(ctx, "go/cas", []byte(expected), []byte(desired)); err != nil || string(v) != want {
			t.Fatalf("CompareAndSet(%q, %q) = %q, %v; want %q", expected, desired, v, err, want)
		}
	}
	cas("e", "d", "e") // missing, expected given: nothing set
	if ok, err := st.Check(ctx, "go/cas"); err != nil || ok {
		t.Fatalf("Check(go/cas) = %v, %v; want false", ok, err)
	}
	cas("", "a", "a")
	cas("a", "b", "b")
	cas("zz", "c", "b")

	mustSet(t, st, "go/tmp", "t")
	if ok, err := st.Delete(ctx, "go/tmp"); err != nil || !ok {
		t.Fatalf("Delete = %v, %v", ok, err)
	}
	if ok, err := st.Delete(ctx, "go/tmp"); err != nil || ok {
		t.Fatalf("second Delete = %v, %v", ok, err)
	}
	// py/hello, go/hello, py/late, go/cnt, go/cas
	if n, err := st.NumKeys(ctx); err != nil || n != 5 {
		t.Fatalf("NumKeys = %d, %v; want 5", n, err)
	}
	// A wait ended by ctx leaves the store usable (torch 1.13 has no
	// CANCEL_WAIT: our client drops that connection).
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	err = st.Wait(short, "never")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait(never) = %v, want a deadline error", err)
	}
	if ok, err := st.Check(ctx, "py/hello", "go/hello"); err != nil || !ok {
		t.Fatalf("Check after a cancelled wait = %v, %v", ok, err)
	}
	mustSet(t, st, "go/done", "1")
	if line := readLine(t, out, wait); line != "from go b -3 6" {
		t.Fatalf("python saw %q, want %q", line, "from go b -3 6")
	}
	if err := wait(); err != nil {
		t.Fatalf("python: %v", err)
	}
	// The master is gone: requests fail instead of hanging.
	if _, err := st.NumKeys(ctx); !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("NumKeys with the master gone: %v, want ErrConnectionLost", err)
	}
}

const torchFileStoreScript = `
import sys, datetime
import torch.distributed as d
s = d.FileStore(sys.argv[1], -1)
s.set_timeout(datetime.timedelta(seconds=30))
s.set("py", b"from python")
s.add("cnt", 2)
s.wait(["go"])
print(s.get("go").decode(), s.add("cnt", 3), s.num_keys(), flush=True)
s.set("gone", b"x")
s.delete_key("gone")
`

// TestFileStoreWithTorch: our FileStore and torch's share one file.
func TestFileStoreWithTorch(t *testing.T) {
	t.Parallel()
	requireTorch(t)
	ctx := torchCtx(t)
	path := filepath.Join(t.TempDir(), "store")
	st, err := NewFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out, wait := startPython(t, torchFileStoreScript, path)
	wantValue(t, st, "py", "from python")
	if err := st.Wait(ctx, "cnt"); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Add(ctx, "cnt", 10); err != nil || n != 12 {
		t.Fatalf("Add after python's add = %d, %v; want 12", n, err)
	}
	mustSet(t, st, "go", "from go")
	// torch counts its "cleanup/" key only at exit; py, cnt, go
	if line := readLine(t, out, wait); line != "from go 15 3" {
		t.Fatalf("python saw %q, want %q", line, "from go 15 3")
	}
	if err := wait(); err != nil {
		t.Fatalf("python: %v", err)
	}
	wantValue(t, st, "cnt", "15")
	if ok, err := st.Check(ctx, "gone"); err != nil || ok {
		t.Fatalf("key deleted by torch: Check = %v, %v", ok, err)
	}
	if n, err := st.NumKeys(ctx); err != nil || n != 3 {
		t.Fatalf("NumKeys = %d, %v; want 3 (torch's cleanup/ counter is not a key)", n, err)
	}
}

// torchAbandonedWaitScript runs a torch client ("a") that lets waits time
// out and goes on using its connection, beside a second client ("b") that
// sets the keys, against torch's own server (argument "torch") or the one
// at host port. It prints one JSON list of [step, outcome] pairs.
const torchAbandonedWaitScript = `
import sys, json, threading, datetime
import torch.distributed as d
T = datetime.timedelta
if sys.argv[1] == "torch":
    master = d.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=T(seconds=30))
    host, port = "127.0.0.1", master.port
else:
    host, port = sys.argv[1], int(sys.argv[2])
a = d.TCPStore(host, port, is_master=False, timeout=T(seconds=30))
b = d.TCPStore(host, port, is_master=False, timeout=T(seconds=30))
out = []
def step(name, fn):
    try:
        r = fn()
        out.append([name, "ok" if r is None else (r.decode() if isinstance(r, bytes) else r)])
    except Exception as e:
        out.append([name, "timeout" if "imeout" in str(e) else "error: " + str(e)])
def applied():
    b.num_keys() # answered once b's earlier sets are applied
step("wait never", lambda: a.wait(["never"], T(seconds=1)))
threading.Timer(0.3, lambda: b.set("late", b"L")).start()
step("wait late", lambda: a.wait(["late"]))
step("get late", lambda: a.get("late"))
step("add", lambda: a.add("cnt", 5))
b.set("never", b"N")
applied()
step("wait absent1", lambda: a.wait(["absent1"], T(milliseconds=500)))
step("add after never set", lambda: a.add("cnt", 1))
b.set("absent1", b"x")
applied()
step("wait absent2", lambda: a.wait(["absent2"], T(seconds=1)))
step("add after absent1 set", lambda: a.add("cnt", 1))
step("get absent1", lambda: a.get("absent1"))
step("b get cnt", lambda: b.get("cnt"))
print(json.dumps(out), flush=True)
`

// TestTorchClientAbandonedWait: a torch 1.13 client whose wait timed out
// keeps using its connection, as rendezvous loops that retry a wait do.
// The same steps run against torch's own server, which documents the
// reference behaviour, and against ours, which must match it step by step.
func TestTorchClientAbandonedWait(t *testing.T) {
	t.Parallel()
	requireTorch(t)
	// What torch 1.13's server does (see connWaits): the abandoned wait on
	// "never" leaves a count that the WAIT on "late" replaces, so "late"
	// releases it and "never" appearing later sends nothing; "absent1"
	// appearing after its wait was abandoned sends a STOP_WAITING nobody
	// asked for yet, which releases the next wait ("absent2", never set)
	// at once; every other request is answered as usual.
	want := [][2]any{
		{"wait never", "timeout"},
		{"wait late", "ok"},
		{"get late", "L"},
		{"add", 5.0},
		{"wait absent1", "timeout"},
		{"add after never set", 6.0},
		{"wait absent2", "ok"},
		{"add after absent1 set", 7.0},
		{"get absent1", "x"},
		{"b get cnt", "7"},
	}
	run := func(t *testing.T, args ...string) {
		out, wait := startPython(t, torchAbandonedWaitScript, args...)
		line := readLine(t, out, wait)
		if err := wait(); err != nil {
			t.Fatalf("python: %v", err)
		}
		var got [][2]any
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("python printed %q: %v", line, err)
		}
		if len(got) != len(want) {
			t.Fatalf("python took %d steps, want %d: %v", len(got), len(want), got)
		}
		for i, w := range want {
			if got[i] != w {
				t.Errorf("step %q: %v, want %v", w[0], got[i][1], w[1])
			}
		}
	}
	t.Run("torch server", func(t *testing.T) {
		t.Parallel()
		run(t, "torch")
	})
	t.Run("gocomm server", func(t *testing.T) {
		t.Parallel()
		srv := startServer(t)
		host, port, _ := strings.Cut(srv.Addr().String(), ":")
		run(t, host, port)
		st, err := DialTCPStore(testCtx(t), srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		wantValue(t, st, "cnt", "7")
	})
}

const torchIdleMasterScript = `
import sys, datetime
import torch.distributed as d
s = d.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=60))
print(s.port, flush=True)
s.wait(["go/done"])
`

// TestGoClientAbandonedWait: when ctx ends one of our client's waits, the
// client drops that wait's connection, so the server forgets the wait (the
// 1.x protocol has no CANCEL_WAIT; torch 2.x's client cancels instead).
// Unlike torch 1.x's client, which keeps the connection, ours is never
// handed a STOP_WAITING meant for the abandoned wait when its key appears
// later: the next wait still waits. Checked against torch's server and ours.
func TestGoClientAbandonedWait(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, addr string) {
		ctx := testCtx(t)
		st, err := DialTCPStore(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		setter, err := DialTCPStore(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer setter.Close()
		shortWait := func(key string) error {
			short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			return st.Wait(short, key)
		}
		for _, key := range []string{"never", "absent1"} {
			if err := shortWait(key); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Wait(%s) = %v, want a deadline error", key, err)
			}
			mustSet(t, setter, key, "x") // the abandoned wait's key appears
		}
		if err := shortWait("absent2"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait(absent2), never set, after abandoned waits: %v, want a deadline error", err)
		}
		late := asyncGet(ctx, st, "late")
		notYet(t, late, "Get(late)")
		mustSet(t, setter, "late", "L")
		if r := within(t, late, 10*time.Second, "Get(late)"); r.err != nil || string(r.v) != "L" {
			t.Fatalf("Get(late) = %q, %v", r.v, r.err)
		}
		if n, err := st.Add(ctx, "cnt", 3); err != nil || n != 3 {
			t.Fatalf("Add = %d, %v; want 3", n, err)
		}
		wantValue(t, st, "absent1", "x")
		mustSet(t, st, "go/done", "1")
	}
	t.Run("gocomm server", func(t *testing.T) {
		t.Parallel()
		run(t, startServer(t).Addr().String())
	})
	t.Run("torch server", func(t *testing.T) {
		t.Parallel()
		requireTorch(t)
		out, wait := startPython(t, torchIdleMasterScript)
		port := readLine(t, out, wait)
		if _, err := strconv.Atoi(port); err != nil {
			t.Fatalf("python printed %q, not a port", port)
		}
		run(t, "127.0.0.1:"+port)
		if err := wait(); err != nil {
			t.Fatalf("python: %v", err)
		}
	})
}
