package sim

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"strconv"

	"github.com/sluice-dev/sluice/core"
)

// Layout of the timeline picture, in pixels.
const (
	svgWidth   = 1200
	svgLeft    = 150
	svgRight   = 20
	svgTop     = 84
	svgStrip   = 10 // lifecycle state band
	svgSlots   = 42 // slot occupancy
	svgQueue   = 20 // queued requests
	svgLaneGap = 14
	svgAxis    = 34
)

var stateColors = [...]string{
	core.Unloaded:      "#e5e7eb",
	core.Loading:       "#fbbf24",
	core.Ready:         "#34d399",
	core.Reconfiguring: "#a78bfa",
	core.Unloading:     "#f87171",
}

// column is one pixel column of one model's lane, aggregated over the
// virtual time it spans.
type column struct {
	stateNs                      [5]int64
	slots, active, running, mgrs int
	queued                       int
	seen                         bool
}

func (c *column) state() core.State {
	best := 0
	for k := range c.stateNs {
		if c.stateNs[k] > c.stateNs[best] {
			best = k
		}
	}
	return core.State(best)
}

// WriteSVG draws the timeline: one lane per model with its lifecycle state
// as a coloured band, the slots in use (dark: running, light: admitted and
// waiting for the pool) under the configured slot count, the queued
// requests below, and marks for failed backend steps, teardowns, shutdown
// and the failure. Each pixel column shows the maximum over its time span
// and the state that lasted longest in it.
func (t *Timeline) WriteSVG(out io.Writer) error {
	w := bufio.NewWriter(out)
	plotW := svgWidth - svgLeft - svgRight
	lane := svgStrip + 2 + svgSlots + 2 + svgQueue + svgLaneGap
	height := svgTop + lane*len(t.Models) + svgAxis
	end := max(t.End, 1)
	dt := float64(end) / float64(plotW)
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(w, `<text x="10" y="18" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(t.Title))
	fmt.Fprintf(w, `<text x="10" y="35" fill="#374151">%s</text>`+"\n", html.EscapeString(t.Subtitle))
	legend := []struct{ color, label string }{
		{stateColors[core.Unloaded], "unloaded"}, {stateColors[core.Loading], "loading"}, {stateColors[core.Ready], "ready"},
		{stateColors[core.Reconfiguring], "reconfiguring"}, {stateColors[core.Unloading], "unloading"},
		{"#2563eb", "running"}, {"#93c5fd", "waiting for pool"}, {"#f97316", "queued requests"}, {"#7c3aed", "queued managers"},
	}
	x := 10
	for _, l := range legend {
		fmt.Fprintf(w, `<rect x="%d" y="46" width="12" height="12" fill="%s"/><text x="%d" y="56">%s</text>`+"\n", x, l.color, x+16, l.label)
		x += 24 + 13*len(l.label)/2
	}
	fmt.Fprintf(w, `<line x1="%d" y1="52" x2="%d" y2="52" stroke="#111" stroke-dasharray="3,2"/><text x="%d" y="56">configured slots</text>`+"\n", x, x+18, x+22)
	x += 122
	fmt.Fprintf(w, `<path d="M%d 58 l4 -8 l4 8 z" fill="#dc2626"/><text x="%d" y="56">backend step failed</text>`+"\n", x, x+12)
	x += 132
	fmt.Fprintf(w, `<line x1="%d" y1="46" x2="%d" y2="58" stroke="#111"/><text x="%d" y="56">evicted / idle</text>`+"\n", x, x, x+5)
	if t.Truncated > 0 {
		fmt.Fprintf(w, `<text x="10" y="74" fill="#b91c1c">recording stopped at %s (sample limit)</text>`+"\n", dur(t.Truncated))
	}
	for k, m := range t.Models {
		y0 := svgTop + k*lane
		cols := make([]column, plotW)
		maxSlots, maxQueue := 1, 1
		for i, s := range m.Samples {
			b := end
			if i+1 < len(m.Samples) {
				b = m.Samples[i+1].T
			}
			maxSlots = max(maxSlots, int(s.Slots), int(s.Active))
			maxQueue = max(maxQueue, int(s.Queued))
			c0 := int(float64(s.T) / dt)
			c1 := int(float64(max(b-1, s.T)) / dt)
			for c := max(c0, 0); c <= min(c1, plotW-1); c++ {
				col := &cols[c]
				lo, hi := max(s.T, int64(float64(c)*dt)), min(b, int64(float64(c+1)*dt))
				col.stateNs[s.State] += max(hi-lo, 1)
				col.slots = max(col.slots, int(s.Slots))
				col.active = max(col.active, int(s.Active))
				col.running = max(col.running, int(s.Running))
				col.queued = max(col.queued, int(s.Queued))
				col.mgrs = max(col.mgrs, int(s.Mgrs))
				col.seen = true
			}
		}
		fmt.Fprintf(w, `<text x="10" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", y0+12, html.EscapeString(m.ID))
		fmt.Fprintf(w, `<text x="10" y="%d" fill="#374151">slots (max %d)</text>`+"\n", y0+svgStrip+2+svgSlots/2+4, maxSlots)
		fmt.Fprintf(w, `<text x="10" y="%d" fill="#9a3412">queue (max %d)</text>`+"\n", y0+svgStrip+4+svgSlots+svgQueue-5, maxQueue)
		slotY := y0 + svgStrip + 2
		queueY := slotY + svgSlots + 2
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="#f9fafb" stroke="#e5e7eb"/>`+"\n", svgLeft, slotY, plotW, svgSlots)
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="#fff7ed" stroke="#fed7aa"/>`+"\n", svgLeft, queueY, plotW, svgQueue)
		// State band, run-length merged.
		runs(plotW, func(c int) string {
			if !cols[c].seen {
				return ""
			}
			return stateColors[cols[c].state()]
		}, func(c0, c1 int, color string) {
			fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", svgLeft+c0, y0, c1-c0, svgStrip, color)
		})
		scale := func(v, full, px int) int { return (v*px + full - 1) / full }
		// Slots: admitted (light) behind running (dark).
		bars(w, plotW, slotY+svgSlots, func(c int) int { return scale(cols[c].active, maxSlots, svgSlots) }, "#93c5fd")
		bars(w, plotW, slotY+svgSlots, func(c int) int { return scale(cols[c].running, maxSlots, svgSlots) }, "#2563eb")
		// Configured slots as a dashed step line.
		path := ""
		last := -1
		for c := range plotW {
			if !cols[c].seen {
				continue
			}
			yy := slotY + svgSlots - scale(cols[c].slots, maxSlots, svgSlots)
			if path == "" || last < 0 {
				path += fmt.Sprintf("M%d %d", svgLeft+c, yy)
			} else if yy != last {
				path += fmt.Sprintf("H%d V%d", svgLeft+c, yy)
			}
			last = yy
		}
		if path != "" {
			fmt.Fprintf(w, `<path d="%sH%d" fill="none" stroke="#111" stroke-width="1" stroke-dasharray="3,2"/>`+"\n", path, svgLeft+plotW)
		}
		bars(w, plotW, queueY+svgQueue, func(c int) int { return scale(cols[c].queued, maxQueue, svgQueue) }, "#f97316")
		runs(plotW, func(c int) string {
			if cols[c].mgrs > 0 {
				return "#7c3aed"
			}
			return ""
		}, func(c0, c1 int, color string) {
			fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="3" fill="%s"/>`+"\n", svgLeft+c0, queueY, c1-c0, color)
		})
		for _, mk := range t.Marks {
			if mk.Model != k {
				continue
			}
			px := svgLeft + int(float64(mk.T)/dt)
			switch {
			case mk.Kind == "fail":
				fmt.Fprintf(w, `<path d="M%d %d l4 -8 l4 8 z" fill="#dc2626"><title>%s failed at %s</title></path>`+"\n", px-4, y0+svgStrip, mk.What, dur(mk.T))
			case mk.Kind == "teardown" && (mk.What == "evict" || mk.What == "idle"):
				fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#111"><title>%s at %s</title></line>`+"\n", px, y0, px, y0+svgStrip+6, mk.What, dur(mk.T))
			}
		}
	}
	axisY := svgTop + lane*len(t.Models)
	fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#111"/>`+"\n", svgLeft, axisY, svgLeft+plotW, axisY)
	step := niceStep(end / 10)
	for v := int64(0); v <= end; v += step {
		px := svgLeft + int(float64(v)/dt)
		fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#111"/><text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n",
			px, axisY, px, axisY+5, px, axisY+18, tickLabel(v, end))
		fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#e5e7eb" stroke-width="0.5"/>`+"\n", px, svgTop-4, px, axisY)
	}
	fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="end" fill="#374151">virtual time</text>`+"\n", svgLeft+plotW, axisY+31)
	for _, mk := range t.Marks {
		if mk.Model >= 0 {
			continue
		}
		px := svgLeft + int(float64(mk.T)/dt)
		color, label := "#111", "shutdown"
		if mk.Kind == "failure" {
			color, label = "#dc2626", "failure: "+mk.What
		}
		fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="6,3"/><text x="%d" y="%d" fill="%s" text-anchor="end">%s</text>`+"\n",
			px, svgTop-6, px, axisY, color, px-3, svgTop-8, color, html.EscapeString(label))
	}
	fmt.Fprintln(w, `</svg>`)
	if err := w.Flush(); err != nil {
		return fmt.Errorf("sim: timeline: %w", err)
	}
	return nil
}

// runs calls draw for every maximal run of columns with the same non-empty
// color.
func runs(n int, color func(int) string, draw func(c0, c1 int, color string)) {
	start, cur := 0, ""
	for c := 0; c <= n; c++ {
		col := ""
		if c < n {
			col = color(c)
		}
		if col != cur {
			if cur != "" {
				draw(start, c, cur)
			}
			start, cur = c, col
		}
	}
}

// bars draws column heights above a baseline, merging equal neighbours.
func bars(w io.Writer, n, base int, height func(int) int, color string) {
	start, cur := 0, 0
	for c := 0; c <= n; c++ {
		hgt := 0
		if c < n {
			hgt = height(c)
		}
		if hgt != cur {
			if cur > 0 {
				fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", svgLeft+start, base-cur, c-start, cur, color)
			}
			start, cur = c, hgt
		}
	}
}

// tickLabel prints an axis time in the unit that suits the axis's end.
func tickLabel(v, end int64) string {
	unit, name := int64(1), "ns"
	switch {
	case end >= 2*secs:
		unit, name = secs, "s"
	case end >= 2*millis:
		unit, name = millis, "ms"
	case end >= 2*micros:
		unit, name = micros, "us"
	}
	return strconv.FormatFloat(float64(v)/float64(unit), 'g', 6, 64) + name
}

// niceStep rounds a step up to 1, 2 or 5 times a power of ten.
func niceStep(v int64) int64 {
	p := int64(1)
	for p*10 <= v {
		p *= 10
	}
	for _, f := range []int64{1, 2, 5, 10} {
		if f*p >= v {
			return max(f*p, 1)
		}
	}
	return 10 * p
}
