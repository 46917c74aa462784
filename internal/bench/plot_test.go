package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"
)

// svgCounts parses an SVG document (failing on malformed XML) and counts
// its elements by name, collecting the text of its <text> elements.
func svgCounts(t *testing.T, doc []byte) (map[string]int, []string) {
	t.Helper()
	counts := map[string]int{}
	var texts []string
	dec := xml.NewDecoder(bytes.NewReader(doc))
	inText := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, doc)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			counts[tk.Name.Local]++
			if tk.Name.Local == "text" {
				inText++
			}
		case xml.EndElement:
			if tk.Name.Local == "text" {
				inText--
			}
		case xml.CharData:
			if inText > 0 {
				texts = append(texts, string(tk))
			}
		}
	}
	return counts, texts
}

func TestWritePlot(t *testing.T) {
	rs := sampleResults()
	rs = append(rs, Result{Series: "c <&>", Op: AllReduce, Bytes: 1 << 10, TimeUS: 10, BusBW: 0.2})
	var buf bytes.Buffer
	if err := WritePlot(&buf, "a & b", rs); err != nil {
		t.Fatal(err)
	}
	counts, texts := svgCounts(t, buf.Bytes())
	all := strings.Join(texts, "|")
	// Panels: allreduce, broadcast, reducescatter (skipped: no data); the
	// barrier has no bandwidth and no panel.
	for _, want := range []string{"a & b", "allreduce: bus bandwidth", "broadcast: bus bandwidth", "reducescatter: bus bandwidth",
		"message size (bytes, log2 scale)", "bus bandwidth (GB/s)", "c <&>", "8", "64M", "a (no data)"} {
		if !strings.Contains(all, want) {
			t.Errorf("plot texts lack %q: %v", want, texts)
		}
	}
	if strings.Contains(all, "barrier") {
		t.Error("the plot has a barrier panel")
	}
	// Lines: allreduce has series a (3 points) and b (2) and c (1 point,
	// no line); broadcast a single point.
	if counts["polyline"] != 2 {
		t.Errorf("%d polylines, want 2", counts["polyline"])
	}
	if counts["circle"] != 3+2+1+1 {
		t.Errorf("%d markers, want 7", counts["circle"])
	}
	if counts["svg"] != 1 {
		t.Errorf("%d svg elements", counts["svg"])
	}
}

func TestWritePlotEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := WritePlot(&buf, "nothing", nil); err != nil {
		t.Fatal(err)
	}
	_, texts := svgCounts(t, buf.Bytes())
	if !strings.Contains(strings.Join(texts, "|"), "no bandwidth to plot") {
		t.Errorf("empty plot texts: %v", texts)
	}
}

// Property: the axis top covers the data with a 1-2-5 step and about five
// ticks.
func TestNiceAxis(t *testing.T) {
	for _, max := range []float64{0.0001, 0.003, 0.05, 0.9, 1, 1.57, 6.67, 19, 100, 12345} {
		step, top := niceAxis(max)
		if top < max || top > max+2*step+1e-12 {
			t.Errorf("niceAxis(%g) = %g, %g: top does not fit the data", max, step, top)
		}
		m := step / math.Pow(10, math.Floor(math.Log10(step)+1e-9))
		if math.Abs(m-1) > 1e-9 && math.Abs(m-2) > 1e-9 && math.Abs(m-5) > 1e-9 {
			t.Errorf("niceAxis(%g) step %g is not 1, 2 or 5 times a power of ten", max, step)
		}
		if ticks := top / step; ticks < 3 || ticks > 12 {
			t.Errorf("niceAxis(%g) = %g, %g: %g ticks", max, step, top, ticks)
		}
	}
	if step, top := niceAxis(0); step <= 0 || top <= 0 {
		t.Errorf("niceAxis(0) = %g, %g", step, top)
	}
	if step, top := niceAxis(math.NaN()); step <= 0 || top <= 0 {
		t.Errorf("niceAxis(NaN) = %g, %g", step, top)
	}
}
