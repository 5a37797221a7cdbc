package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// WriteTable prints one table per matrix (case, cells, verdict, time),
// failures with their messages, the linearizability check and a summary.
func (r *Report) WriteTable(w io.Writer, s *Suite) {
	titles := map[string]string{}
	var order []string
	for _, f := range s.Files {
		titles[f.Matrix] = f.Title
		order = append(order, f.Matrix)
	}
	by := map[string][]Result{}
	for _, x := range r.Results {
		by[x.Matrix] = append(by[x.Matrix], x)
	}
	fmt.Fprintf(w, "Sluice conformance against %s\n", r.Target)
	var pass, fail, skip int
	for _, m := range order {
		rs := by[m]
		if len(rs) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s (%s)\n", titles[m], m)
		fmt.Fprintf(w, "  %-52s %-7s %8s  %s\n", "CASE", "VERDICT", "TIME", "CELLS")
		for _, x := range rs {
			cells := strings.Join(x.Covers, " ")
			if len(x.Partial) > 0 {
				cells = strings.TrimSpace(cells + " partial: " + strings.Join(x.Partial, " "))
			}
			fmt.Fprintf(w, "  %-52s %-7s %7dms  %s\n", x.Case, x.Verdict, x.Duration.Milliseconds(), cells)
			switch x.Verdict {
			case Pass:
				pass++
			case Fail:
				fail++
				for _, line := range strings.Split(strings.TrimRight(x.Error, "\n"), "\n") {
					fmt.Fprintf(w, "      | %s\n", line)
				}
			case Skip:
				skip++
				fmt.Fprintf(w, "      (skipped: %s)\n", x.Error)
			}
		}
	}
	if r.Lin != nil {
		fmt.Fprintf(w, "\nLinearizability over HTTP: %d histories, %d not linearizable", r.Lin.Histories, r.Lin.Failed)
		if r.Lin.Error != "" {
			fmt.Fprintf(w, "\n  %s", strings.ReplaceAll(r.Lin.Error, "\n", "\n  "))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped in %s\n", pass, fail, skip, r.Duration.Round(1e6))
	if f := r.Failed(); len(f) > 0 {
		var cells []string
		for _, x := range f {
			cells = append(cells, x.Cells()...)
		}
		fmt.Fprintf(w, "FAILED cells: %s\n", strings.Join(uniq(cells), " "))
	}
}

// Cells returns the cells a result's case covers.
func (x *Result) Cells() []string { return append(append([]string(nil), x.Covers...), x.Partial...) }

// WriteJSON writes the report as indented JSON to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("conformance: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("conformance: %w", err)
	}
	return nil
}

func uniq(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
