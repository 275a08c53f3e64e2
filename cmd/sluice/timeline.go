package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/sluicehq/sluice/offload"
)

// writeTimeline draws the store's spans of the last passes as an SVG: one
// row per layer, its weight reads (blue; the layout of the read bytes in
// panels after them green) above its compute (orange), on one time axis,
// so whether reads overlap compute shows at a glance.
func writeTimeline(w io.Writer, spans []offload.Span, passes int) error {
	var layers, last int
	for _, s := range spans {
		layers = max(layers, s.Layer+1)
		if !s.Read {
			last = max(last, s.Pass)
		}
	}
	first := max(0, last-passes+1)
	var keep []offload.Span
	var t0, t1 time.Time
	for _, s := range spans {
		if !s.Read && s.Pass >= first {
			if t0.IsZero() || s.Start.Before(t0) {
				t0 = s.Start
			}
			if s.End.After(t1) {
				t1 = s.End
			}
		}
	}
	for _, s := range spans {
		if s.Layer >= 0 && s.End.After(t0) && s.Start.Before(t1) {
			keep = append(keep, s)
		}
	}
	if len(keep) == 0 || layers == 0 {
		return fmt.Errorf("timeline: nothing recorded (the ssd tier records it)")
	}
	slices.SortFunc(keep, func(a, b offload.Span) int { return a.Start.Compare(b.Start) })
	const left, width, row, top = 70, 1100, 18, 30
	span := t1.Sub(t0).Seconds()
	x := func(t time.Time) float64 { return left + width*max(0, t.Sub(t0).Seconds())/span }
	h := top + layers*row + 40
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", left+width+20, h)
	fmt.Fprintf(w, `<text x="%d" y="16">%d passes, %.1f ms: weight reads (blue), panel layout (green) and compute (orange) per layer</text>`+"\n", left, last-first+1, 1000*span)
	for l := range layers {
		fmt.Fprintf(w, `<text x="4" y="%d">layer %d</text>`+"\n", top+l*row+12, l)
	}
	for _, s := range keep {
		y, hgt, color := top+s.Layer*row, row/2-1, "#e8871e"
		switch {
		case s.Pack:
			color = "#2a9d5c"
		case s.Read:
			color = "#3a7bd5"
		default:
			y += row / 2
		}
		x0, x1 := x(s.Start), x(s.End)
		fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, y, max(x1-x0, 0.5), hgt, color)
	}
	for i := 0; i <= 10; i++ {
		xx := left + width*float64(i)/10
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ccc"/><text x="%.1f" y="%d">%.0f ms</text>`+"\n",
			xx, top, xx, top+layers*row, xx-10, top+layers*row+14, 1000*span*float64(i)/10)
	}
	_, err := fmt.Fprintln(w, "</svg>")
	return err
}
