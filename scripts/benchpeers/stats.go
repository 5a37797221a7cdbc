package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// pct returns the p-th percentile (nearest rank) of lats, 0 for none.
func pct(lats []time.Duration, p float64) time.Duration {
	if len(lats) == 0 {
		return 0
	}
	s := slices.Clone(lats)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	i = max(0, min(i, len(s)-1))
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// figure is one measured number of one workload for one design. Lower is
// better for every figure.
type figure struct {
	row   string // e.g. "1 fast model p99 (ms)"
	value float64
	note  string // e.g. refused requests
}

// table is the run's figures: rows in workload order, one column per
// design.
type table struct {
	designs []string
	rows    []string
	cells   map[string]map[string]figure // row -> design -> figure
}

func newTable(designs []string) *table {
	return &table{designs: designs, cells: map[string]map[string]figure{}}
}

func (t *table) add(design string, figs []figure) {
	for _, f := range figs {
		if t.cells[f.row] == nil {
			t.cells[f.row] = map[string]figure{}
			t.rows = append(t.rows, f.row)
		}
		t.cells[f.row][design] = f
	}
}

// cell formats one figure with its ratio to the first design's (Sluice's):
// "812 (64.2x)"; a zero baseline has no ratio, so the difference is shown.
func (t *table) cell(row, design string) string {
	f, ok := t.cells[row][design]
	if !ok {
		return "-"
	}
	s := formatValue(f.value)
	if design != t.designs[0] {
		base, ok := t.cells[row][t.designs[0]]
		switch {
		case !ok:
		case base.value == 0 && f.value == 0:
			s += " (=)"
		case base.value == 0:
			s += fmt.Sprintf(" (+%s)", formatValue(f.value))
		default:
			s += fmt.Sprintf(" (%.2fx)", f.value/base.value)
		}
	}
	if f.note != "" {
		s += " [" + f.note + "]"
	}
	return s
}

func formatValue(v float64) string {
	switch {
	case v == float64(int64(v)):
		return fmt.Sprintf("%d", int64(v))
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// String renders the table as Markdown: per workload figure, per design,
// the figure and its ratio to Sluice's.
func (t *table) String() string {
	var b strings.Builder
	b.WriteString("| workload, figure (lower is better) |")
	for _, d := range t.designs {
		b.WriteString(" " + d + " |")
	}
	b.WriteString("\n|---|")
	for range t.designs {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		b.WriteString("| " + r + " |")
		for _, d := range t.designs {
			b.WriteString(" " + t.cell(r, d) + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}
