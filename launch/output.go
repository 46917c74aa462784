package launch

import (
	"bytes"
	"io"
	"strconv"
	"sync"
)

// maxLine bounds a line held for prefixing: longer lines are cut into
// pieces, each printed with the prefix, so a rank that never writes a
// newline cannot exhaust memory.
const maxLine = 64 << 10

// syncWriter serialises whole lines from every rank onto one writer. The
// stdout and stderr writers share one mutex, so that they may be the same
// writer.
type syncWriter struct {
	mu *sync.Mutex // protects w
	w  io.Writer
}

func (s *syncWriter) writeLine(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.Write(b) // a failing terminal must not stop the job
}

// tail keeps the last n lines a rank printed (both streams).
type tail struct {
	mu    sync.Mutex // protects following
	n     int
	lines []string
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n <= 0 {
		return
	}
	if len(t.lines) == t.n {
		copy(t.lines, t.lines[1:])
		t.lines = t.lines[:t.n-1]
	}
	t.lines = append(t.lines, line)
}

func (t *tail) get() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.lines...)
}

// lineWriter is one stream of one rank: it cuts what the rank writes into
// lines and prints each with the rank's prefix. os/exec calls Write from a
// single goroutine per stream.
type lineWriter struct {
	prefix []byte
	out    *syncWriter
	tail   *tail
	buf    []byte // the current unfinished line
}

func newLineWriter(rank int, out *syncWriter, t *tail) *lineWriter {
	return &lineWriter{prefix: []byte("[" + strconv.Itoa(rank) + "] "), out: out, tail: t}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := maxLine - len(w.buf)
			if len(p) < room {
				w.buf = append(w.buf, p...)
				break
			}
			w.buf = append(w.buf, p[:room]...)
			p = p[room:]
			w.emit()
			continue
		}
		w.buf = append(w.buf, p[:i]...)
		p = p[i+1:]
		w.emit()
	}
	return n, nil
}

// emit prints the buffered line.
func (w *lineWriter) emit() {
	line := make([]byte, 0, len(w.prefix)+len(w.buf)+1)
	line = append(line, w.prefix...)
	line = append(line, w.buf...)
	line = append(line, '\n')
	w.out.writeLine(line)
	w.tail.add(string(bytes.TrimRight(w.buf, "\r")))
	w.buf = w.buf[:0]
}

// flush prints an unfinished last line. Call it after the stream ended.
func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.emit()
	}
}
