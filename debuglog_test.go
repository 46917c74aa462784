package comm_test

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// logKeys returns the keys of one line of slog's text format (key=value
// pairs, values quoted when they hold spaces), in order; ok is false when
// the line is not one.
func logKeys(line string) (keys []string, ok bool) {
	for line != "" {
		eq := strings.IndexByte(line, '=')
		if eq <= 0 || strings.ContainsAny(line[:eq], " \"") {
			return nil, false
		}
		keys = append(keys, line[:eq])
		line = line[eq+1:]
		if strings.HasPrefix(line, `"`) {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, false
			}
			line = line[len(q):]
		} else if sp := strings.IndexByte(line, ' '); sp >= 0 {
			line = line[sp:]
		} else {
			line = ""
		}
		line = strings.TrimPrefix(line, " ")
	}
	return keys, len(keys) > 0 && keys[0] == "time"
}

func TestLogKeys(t *testing.T) {
	keys, ok := logKeys(`time=2026-01-01T00:00:00Z level=DEBUG msg="comm: bound to CPUs" rank=0 cpus=0 x="a \"b=c\" d"`)
	if want := "time level msg rank cpus x"; !ok || strings.Join(keys, " ") != want {
		t.Errorf("logKeys = %q, %v, want %q", keys, ok, want)
	}
	if _, ok := logKeys("threads on 0-1"); ok {
		t.Error("a line that is not slog's was read as one")
	}
}

// Every line GOCOMM_DEBUG logs through Init, CPU binding, the debug
// endpoint and a collective names each key once (the logger carries
// rank=, so a call site must not add it again).
func TestDebugLogHasNoRepeatedKeys(t *testing.T) {
	const n = 2
	env := []string{"GOCOMM_DEBUG=1", "GOCOMM_DEBUG_ADDR=127.0.0.1:0", "GOCOMM_BIND=auto"}
	errs, outs := launchRanks(t, n, "bind-report", time.Minute, env...)
	lines, bound := 0, 0
	for r, out := range outs {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v\n%s", r, errs[r], out)
		}
		for _, line := range strings.Split(out, "\n") {
			keys, ok := logKeys(line)
			if !ok {
				continue
			}
			lines++
			if strings.Contains(line, "bound to CPUs") {
				bound++
			}
			seen := map[string]bool{}
			for _, k := range keys {
				if seen[k] {
					t.Errorf("rank %d logged key %q twice: %s", r, k, line)
				}
				seen[k] = true
			}
			if !seen["rank"] {
				t.Errorf("rank %d logged a line without its rank: %s", r, line)
			}
		}
	}
	// Binding happens when every rank can have a CPU of its own.
	if runtime.NumCPU() >= n && bound != n {
		t.Errorf("%d lines say \"bound to CPUs\", want one per rank:\n%s", bound, strings.Join(outs, "\n"))
	}
	if lines < 2*n {
		t.Errorf("only %d log lines, want the rendezvous and the debug endpoint's of each rank at least:\n%s", lines, strings.Join(outs, "\n"))
	}
}
