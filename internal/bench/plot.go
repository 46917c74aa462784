package bench

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Plot geometry, in SVG user units (pixels).
const (
	plotWidth    = 760 // whole image
	panelHeight  = 330 // one op's panel, titles included
	plotLeft     = 70  // room for the y labels
	plotRight    = 190 // room for the legend
	plotTop      = 40  // room for the panel title
	plotBottom   = 50  // room for the x labels
	maxXLabels   = 12
	legendLineDY = 18
)

// palette colours the series, in order (Okabe-Ito, readable by the colour
// blind).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"}

// WritePlot draws busbw against size as an SVG image: one panel per op
// (barriers have no bandwidth and are left out), one line per series,
// sizes on a log2 axis. title heads the image.
func WritePlot(w io.Writer, title string, results []Result) error {
	var ops []Op
	for _, op := range opsOf(results) {
		if op != Barrier {
			ops = append(ops, op)
		}
	}
	series := seriesNames(results)
	height := plotTop + max(1, len(ops))*panelHeight
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		plotWidth, height, plotWidth, height)
	fmt.Fprintf(bw, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(bw, `<text x="%d" y="24" text-anchor="middle" font-size="16" font-weight="bold">%s</text>`+"\n", plotWidth/2, esc(title))
	if len(ops) == 0 {
		fmt.Fprintf(bw, `<text x="%d" y="%d" text-anchor="middle">no bandwidth to plot</text>`+"\n", plotWidth/2, plotTop+40)
	}
	for i, op := range ops {
		var rs []Result
		for _, r := range results {
			if r.Op == op && r.Skip == "" && r.Bytes > 0 && r.TimeUS > 0 {
				rs = append(rs, r)
			}
		}
		drawPanel(bw, float64(plotTop+i*panelHeight), op, series, rs)
	}
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

// drawPanel draws one op's chart with its top at y0.
func drawPanel(w io.Writer, y0 float64, op Op, series []string, rs []Result) {
	left, right := float64(plotLeft), float64(plotWidth-plotRight)
	top, bottom := y0+plotTop, y0+panelHeight-plotBottom
	fmt.Fprintf(w, `<text x="%g" y="%g" text-anchor="middle" font-size="14">%s: bus bandwidth against message size</text>`+"\n",
		(left+right)/2, y0+plotTop-14, esc(op.String()))

	// Axes ranges: x in log2(size), y in GB/s from 0.
	xlo, xhi := math.Inf(1), math.Inf(-1)
	ymax := 0.0
	for _, r := range rs {
		x := math.Log2(float64(r.Bytes))
		xlo, xhi = math.Min(xlo, x), math.Max(xhi, x)
		ymax = math.Max(ymax, r.BusBW)
	}
	if len(rs) == 0 {
		xlo, xhi = 3, 26
	}
	xlo, xhi = math.Floor(xlo), math.Ceil(xhi)
	if xhi-xlo < 2 {
		xlo, xhi = xlo-1, xhi+1
	}
	ystep, ytop := niceAxis(ymax)
	px := func(x float64) float64 { return left + (x-xlo)/(xhi-xlo)*(right-left) }
	py := func(y float64) float64 { return bottom - y/ytop*(bottom-top) }

	// Grid and tick labels.
	fmt.Fprintln(w, `<g stroke="#ddd" stroke-width="1">`)
	for y := 0.0; y <= ytop+ystep/2; y += ystep {
		fmt.Fprintf(w, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f"/>`+"\n", left, py(y), right, py(y))
	}
	every := math.Max(1, math.Ceil((xhi-xlo+1)/maxXLabels))
	for x := xlo; x <= xhi; x++ {
		fmt.Fprintf(w, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g"/>`+"\n", px(x), top, px(x), bottom)
	}
	fmt.Fprintln(w, `</g>`)
	for y := 0.0; y <= ytop+ystep/2; y += ystep {
		fmt.Fprintf(w, `<text x="%g" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, py(y)+4, trimFloat(y))
	}
	for x := xlo; x <= xhi; x++ {
		if math.Mod(x-xlo, every) != 0 {
			continue
		}
		fmt.Fprintf(w, `<text x="%.1f" y="%g" text-anchor="middle">%s</text>`+"\n", px(x), bottom+16, esc(FormatSize(int64(math.Exp2(x)))))
	}
	fmt.Fprintf(w, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#333"/>`+"\n", left, top, right-left, bottom-top)
	fmt.Fprintf(w, `<text x="%g" y="%g" text-anchor="middle">message size (bytes, log2 scale)</text>`+"\n", (left+right)/2, bottom+36)
	fmt.Fprintf(w, `<text x="%g" y="%g" text-anchor="middle" transform="rotate(-90 %g %g)">bus bandwidth (GB/s)</text>`+"\n",
		left-48, (top+bottom)/2, left-48, (top+bottom)/2)

	// One line per series, with a marker per point.
	for si, name := range series {
		colour := palette[si%len(palette)]
		var pts []Result
		for _, r := range rs {
			if r.Series == name {
				pts = append(pts, r)
			}
		}
		slices.SortFunc(pts, func(a, b Result) int { return cmpInt64(a.Bytes, b.Bytes) })
		if len(pts) > 1 {
			var sb strings.Builder
			for _, r := range pts {
				fmt.Fprintf(&sb, "%.1f,%.1f ", px(math.Log2(float64(r.Bytes))), py(r.BusBW))
			}
			fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", colour, strings.TrimSpace(sb.String()))
		}
		for _, r := range pts {
			fmt.Fprintf(w, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s %v %s: %.3f GB/s, %s us</title></circle>`+"\n",
				px(math.Log2(float64(r.Bytes))), py(r.BusBW), colour, esc(name), r.Op, HumanSize(r.Bytes), r.BusBW, FormatMicros(r.TimeUS))
		}
		ly := top + 10 + float64(si)*legendLineDY
		fmt.Fprintf(w, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="2"/>`+"\n", right+12, ly, right+36, ly, colour)
		label := name
		if label == "" {
			label = "commbench"
		}
		if len(pts) == 0 {
			label += " (no data)"
		}
		fmt.Fprintf(w, `<text x="%g" y="%g">%s</text>`+"\n", right+42, ly+4, esc(label))
	}
}

// niceAxis picks a tick step of 1, 2 or 5 times a power of ten giving
// about five ticks up to at least max, and the axis top (a multiple of the
// step).
func niceAxis(max float64) (step, top float64) {
	if !(max > 0) || math.IsInf(max, 0) {
		return 0.2, 1
	}
	raw := max / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / p; {
	case f <= 1:
		step = p
	case f <= 2:
		step = 2 * p
	case f <= 5:
		step = 5 * p
	default:
		step = 10 * p
	}
	top = math.Ceil(max/step) * step
	if top < max*1.02 {
		top += step
	}
	return step, top
}

// trimFloat prints a tick value without trailing zeros.
func trimFloat(v float64) string {
	s := fmt.Sprintf("%.4f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// esc escapes text for SVG.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
