package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func rep(file string, muts ...[3]any) report {
	f := reportFile{Name: file}
	for _, m := range muts {
		f.Mutations = append(f.Mutations, reportMutation{Type: "CONDITIONALS_BOUNDARY", Status: m[1].(string), Line: m[0].(int), Column: m[2].(int)})
	}
	return report{Files: []reportFile{f}}
}

// The weak lines are those of covered mutants that fewer than two checks
// killed; a -weak run's SKIPPED mutants (outside its lines) count for
// nothing, and its kills join the whole run's.
func TestWeakLines(t *testing.T) {
	tb := &table{killed: map[string][]string{}, covered: map[string]bool{}, places: map[string]place{}}
	tb.add("unit", rep("a.go", [3]any{10, "KILLED", 3}, [3]any{12, "LIVED", 5}, [3]any{14, "KILLED", 2}, [3]any{20, "NOT COVERED", 1}, [3]any{22, "NOT VIABLE", 1}))
	tb.add("rapid", rep("a.go", [3]any{10, "KILLED", 3}, [3]any{12, "LIVED", 5}, [3]any{14, "LIVED", 2}, [3]any{20, "NOT COVERED", 1}))
	got := tb.weakLines()
	if want := map[string][]int{"a.go": {12, 14}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("weak lines %v, want %v", got, want)
	}
	tb.add("conformance", rep("a.go", [3]any{10, "SKIPPED", 3}, [3]any{12, "KILLED", 5}, [3]any{14, "TIMED OUT", 2}))
	if got := tb.killed["a.go:10:3 CONDITIONALS_BOUNDARY"]; !reflect.DeepEqual(got, []string{"unit", "rapid"}) {
		t.Fatalf("a skipped mutant changed the kills: %v", got)
	}
	if got := tb.weakLines(); len(got) != 1 || !reflect.DeepEqual(got["a.go"], []int{12}) {
		t.Fatalf("after the weak run: %v, want line 12 only (killed once)", got)
	}
	var b strings.Builder
	tb.print(&b)
	if !strings.Contains(b.String(), "mutants 3 (1 more that no check executes): killed by 0 checks 0, by 1 check 1, by 2 or more 2 (1 kills were timeouts)") {
		t.Fatalf("table:\n%s", b.String())
	}
}

// mark appends the comment without moving any column, and refuses a line
// the file does not have.
func TestMark(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.go")
	if err := os.WriteFile(p, []byte("package x\n\nfunc f(a int) bool {\n\treturn a < 3\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := mark(p, []int{4}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if want := "package x\n\nfunc f(a int) bool {\n\treturn a < 3 // mutation: weak\n}\n"; string(b) != want {
		t.Fatalf("marked:\n%q\nwant\n%q", b, want)
	}
	if err := mark(p, []int{9}); err == nil {
		t.Fatal("marked a line past the end")
	}
}

// A check's kill counts once when both its whole and its -weak report
// have it.
func TestKillCountsOncePerCheck(t *testing.T) {
	tb := &table{killed: map[string][]string{}, covered: map[string]bool{}, places: map[string]place{}}
	tb.add("unit", rep("a.go", [3]any{10, "KILLED", 3}))
	tb.add("unit", rep("a.go", [3]any{10, "TIMED OUT", 3}))
	if got := tb.killed["a.go:10:3 CONDITIONALS_BOUNDARY"]; !reflect.DeepEqual(got, []string{"unit"}) || tb.timeouts != 0 {
		t.Fatalf("kills %v, timeouts %d", got, tb.timeouts)
	}
}
