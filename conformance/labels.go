package conformance

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// The evidence columns of CONTRACT.md (its "Evidence labels" section): for
// every cell, the tests that exercise it and how well. They are generated
// from the cases' covers/partial declarations and from what the last
// conformance run showed (RunEvidence), never written by hand; only a case
// that ran and passed counts:
//
//	D  a passing case covers the cell fully (it sets up exactly the
//	   situation, performs the operation and checks the whole stated
//	   behaviour);
//	P  passing cases cover it only partially (their `missing` says what is
//	   left);
//	U  no passing case exercises it (none does, or they were skipped).
//
// A GPU-only cell is never D from the suite's own run (the fixture cannot
// show a device); its Test column says GPU-only, unless a recorded device
// run covers it (devices.go): then the run's log is its evidence. An area names the GPU-only cells that hold its
// GPU part (Area.GPU) and the real engines' tests outside this suite that
// exercise its real-engine part (Area.External) in its Test column.

// TestPrefix is the Go test whose subtests are the cases.
const TestPrefix = "TestConformance/"

// Cell is one row of a CONTRACT.md matrix.
type Cell struct {
	ID        string
	GPUOnly   bool
	Line      int // 1-based
	Test      string
	Label     string
	Behaviour string
}

// Evidence is the generated Test and Label of one cell.
type Evidence struct {
	Test  string
	Label string
}

var rowRe = regexp.MustCompile(`^\| ([a-z]+\.[a-z0-9.-]+) \|`)

// ParseContract returns every matrix row of CONTRACT.md in order.
func ParseContract(text string) ([]Cell, error) {
	var cells []Cell
	seen := map[string]bool{}
	for i, line := range strings.Split(text, "\n") {
		m := rowRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		cols := splitRow(line)
		if len(cols) != 6 {
			return nil, fmt.Errorf("CONTRACT.md:%d: cell %s has %d columns, want 6", i+1, m[1], len(cols))
		}
		if seen[m[1]] {
			return nil, fmt.Errorf("CONTRACT.md:%d: cell %s listed twice", i+1, m[1])
		}
		seen[m[1]] = true
		cells = append(cells, Cell{ID: m[1], Line: i + 1, Behaviour: cols[3], Test: cols[4], Label: cols[5],
			GPUOnly: strings.HasPrefix(cols[3], "**GPU-only.**")})
	}
	if len(cells) == 0 {
		return nil, errors.New("CONTRACT.md: no matrix rows found")
	}
	return cells, nil
}

// splitRow splits a table row into its trimmed columns. The first four
// columns may not contain " | "; the evidence columns are the last two.
func splitRow(line string) []string {
	s := strings.TrimSpace(line)
	s = strings.TrimPrefix(s, "|")
	s = strings.TrimSuffix(s, "|")
	parts := strings.Split(s, "|")
	// Re-join text columns that contained a pipe inside backticks.
	if len(parts) > 6 {
		head := strings.Join(parts[3:len(parts)-2], "|")
		parts = append(append(parts[:3:3], head), parts[len(parts)-2:]...)
	}
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// Evidence computes the Test and Label of every cell from the suite and the
// verdicts of its last run (ran): a case that did not pass counts for no
// cell. It fails when a case names a cell CONTRACT.md does not have.
func (s *Suite) Evidence(cells []Cell, ran *RunEvidence) (map[string]Evidence, error) {
	known := map[string]Cell{}
	for _, c := range cells {
		known[c.ID] = c
	}
	full := map[string][]string{}
	part := map[string][]string{}
	notes := map[string]string{}
	var errs []error
	for _, c := range s.Cases {
		if c.Note != "" {
			notes[c.Name] = c.Note
		}
		for _, id := range c.Covers {
			if _, ok := known[id]; !ok {
				errs = append(errs, fmt.Errorf("case %s covers %s, which CONTRACT.md does not have", c.Name, id))
			}
			if ran.passed(c.Name) {
				full[id] = append(full[id], c.Name)
			}
		}
		for _, id := range c.Partial {
			if _, ok := known[id]; !ok {
				errs = append(errs, fmt.Errorf("case %s partially covers %s, which CONTRACT.md does not have", c.Name, id))
			}
			if ran.passed(c.Name) {
				part[id] = append(part[id], c.Name)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for id, a := range s.Areas {
		if _, ok := known[id]; !ok {
			errs = append(errs, fmt.Errorf("area %s is not a cell of CONTRACT.md", id))
		}
		for _, m := range a.Cells {
			if _, ok := known[m]; !ok {
				errs = append(errs, fmt.Errorf("area %s rests on %s, which CONTRACT.md does not have", id, m))
			}
			if _, nested := s.Areas[m]; nested {
				errs = append(errs, fmt.Errorf("area %s rests on another area, %s", id, m))
			}
		}
		for _, m := range a.GPU {
			if c, ok := known[m]; !ok || !c.GPUOnly {
				errs = append(errs, fmt.Errorf("area %s: gpu names %s, which is not a GPU-only cell of CONTRACT.md", id, m))
			}
		}
		if len(a.GPU) > 0 && a.GPUWhy == "" {
			errs = append(errs, fmt.Errorf("area %s: gpu cells need gpu_why: what of the area only a GPU shows", id))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	runs, err := DeviceRuns()
	if err != nil {
		return nil, err
	}
	device := map[string]DeviceRun{}
	for _, r := range runs {
		for _, id := range r.Covers {
			if _, ok := known[id]; !ok {
				errs = append(errs, fmt.Errorf("device run %s covers %s, which CONTRACT.md does not have", r.Log, id))
			}
			if _, area := s.Areas[id]; area {
				errs = append(errs, fmt.Errorf("device run %s covers %s, an area (areas take the label of their cells)", r.Log, id))
			}
			device[id] = r // a later run supersedes an earlier one
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out := map[string]Evidence{}
	for _, c := range cells {
		if r, ok := device[c.ID]; ok {
			out[c.ID] = Evidence{Test: r.evidence(), Label: "D"}
			continue
		}
		var e Evidence
		switch {
		case len(full[c.ID]) > 0 && !c.GPUOnly:
			e = Evidence{Test: testNames(full[c.ID], notes), Label: "D"}
		case len(full[c.ID])+len(part[c.ID]) > 0:
			e = Evidence{Test: testNames(append(full[c.ID], part[c.ID]...), nil), Label: "P"}
		default:
			e = Evidence{Test: "—", Label: "U"}
		}
		if c.GPUOnly {
			if e.Test == "—" {
				e.Test = "GPU-only"
			} else {
				e.Test += " (GPU-only)"
			}
		}
		out[c.ID] = e
	}
	for id, a := range s.Areas {
		out[id] = s.areaEvidence(out[id], a, out, known[id].GPUOnly)
	}
	return out, nil
}

var labelRank = map[string]int{"U": 0, "P": 1, "D": 2}

// areaEvidence is the weakest label among an area's cells (and its own
// cases, and its cap); the Test column names the weakest cells.
func (s *Suite) areaEvidence(own Evidence, a Area, ev map[string]Evidence, gpu bool) Evidence {
	label := "D"
	if own.Label != "U" {
		label = own.Label
	}
	if a.Cap != "" && labelRank[a.Cap] < labelRank[label] {
		label = a.Cap
	}
	var weakest []string
	low := "D"
	for _, m := range a.Cells {
		l := ev[m].Label
		switch {
		case labelRank[l] < labelRank[low]:
			low, weakest = l, []string{m}
		case l == low:
			weakest = append(weakest, m)
		}
	}
	if labelRank[low] < labelRank[label] {
		label = low
	}
	if len(a.Cells) == 0 && own.Label == "U" {
		if labelRank[a.Cap] < labelRank[label] {
			label = a.Cap
		}
		return Evidence{Test: own.Test, Label: map[bool]string{true: "U", false: label}[gpu]}
	}
	var b strings.Builder
	if own.Label != "U" {
		b.WriteString(strings.TrimSuffix(own.Test, " (GPU-only)") + "; ")
	}
	fmt.Fprintf(&b, "weakest of %d cells", len(a.Cells))
	if low != "D" {
		sort.Strings(weakest)
		if len(weakest) > 3 {
			weakest = append(weakest[:3], fmt.Sprintf("+%d", len(weakest)-3))
		}
		fmt.Fprintf(&b, " (%s: %s)", low, strings.Join(weakest, ", "))
	}
	if len(a.External) > 0 {
		b.WriteString("; real engines: ")
		for i, x := range a.External {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("`" + x + "`")
		}
	}
	if len(a.GPU) > 0 {
		fmt.Fprintf(&b, "; GPU-only part (%s): %s", a.GPUWhy, strings.Join(a.GPU, ", "))
	}
	if a.Cap != "" {
		fmt.Fprintf(&b, "; at most %s: %s", a.Cap, a.Why)
	}
	if gpu {
		b.WriteString(" (GPU-only)")
	}
	if gpu && label == "D" {
		label = "P"
	}
	return Evidence{Test: b.String(), Label: label}
}

// testNames formats up to three test names, each followed by its case's
// note (if any); more are counted.
func testNames(cases []string, notes map[string]string) string {
	names := append([]string(nil), cases...)
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		if i == 3 {
			fmt.Fprintf(&b, " +%d more", len(names)-3)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("`" + TestPrefix + n + "`")
		if note := notes[n]; note != "" {
			b.WriteString(" (" + note + ")")
		}
	}
	return b.String()
}

// RewriteContract returns CONTRACT.md with the Test and Label columns of
// every cell replaced by ev, and the IDs of the cells whose columns
// changed.
func RewriteContract(text string, ev map[string]Evidence) (string, []string) {
	lines := strings.Split(text, "\n")
	var changed []string
	for i, line := range lines {
		m := rowRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		e, ok := ev[m[1]]
		if !ok {
			continue
		}
		body := strings.TrimSuffix(strings.TrimRight(line, " "), "|")
		k := strings.LastIndex(body, "|")
		if k < 0 {
			continue
		}
		j := strings.LastIndex(body[:k], "|")
		if j < 0 {
			continue
		}
		next := body[:j] + "| " + e.Test + " | " + e.Label + " |"
		if next != line {
			changed = append(changed, m[1])
			lines[i] = next
		}
	}
	return strings.Join(lines, "\n"), changed
}

// LabelCounts counts the labels of ev.
func LabelCounts(ev map[string]Evidence) map[string]int {
	n := map[string]int{}
	for _, e := range ev {
		n[e.Label]++
	}
	return n
}
