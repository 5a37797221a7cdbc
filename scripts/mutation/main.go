// Command mutation is `make mutation`: go-gremlins (v0.6.0) mutates core
// once per independent check, each check being its own test command (core's
// unit tests, rapid, the model checker at the make-test bound, a simulator
// campaign, the conformance suite in process; the last three are
// core/checks_test.go, built with the sluice_checks tag, and
// core/checks_conformance_test.go with sluice_checks_conformance). It then prints,
// for every mutant, which checks killed it, and one table: mutants, killed
// by 0, 1 and 2 or more checks.
//
// A full run over core is 667 mutants times five checks (about 10 hours
// on two cores), so -files picks the files of core to mutate (a regexp on the
// file name; default ticket.go, 22 mutants, about 20 minutes), -checks the
// checks, and -weak runs the chosen checks only over the lines of the
// mutants that fewer than two checks killed in -out's reports (so the
// costliest check, conformance, can follow the cheap four over a whole run).
// The table joins every report in -out.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
)

// gremlins is the kept mutation tool, run through the module proxy.
const gremlins = "github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0"

// A check is one test command: the GOFLAGS that select its tests, the
// build tags they need (core's own tests need none, so their test binary
// stays small), and what else its environment sets.
type check struct {
	name, goflags, tags string
	env                 []string
}

var checks = [...]check{
	{"unit", "-skip=Rapid", "", nil},
	// rapid at make test's 5000 checks (gremlins passes no test flags), and
	// without fail files: gremlins runs every mutant in the same copy of the
	// module, so a failure rapid saved under one mutant would be replayed
	// under the next, and a replay that fails for a reason of its own
	// (a false positive of the reference) would count as a kill of each.
	{"rapid", "-run=Rapid", "", []string{"SLUICE_RAPID_CHECKS=5000", "RAPID_NOFAILFILE=1"}},
	{"model", "-run=^TestCheckModel$", "sluice_checks", nil},
	{"sim", "-run=^TestCheckSim$", "sluice_checks", nil},
	{"conformance", "-run=^TestCheckConformance$", "sluice_checks_conformance", nil},
}

// report is the part of gremlins' JSON output (-o) read here.
type report struct {
	Files []reportFile `json:"files"`
}

type reportFile struct {
	Name      string           `json:"file_name"`
	Mutations []reportMutation `json:"mutations"`
}

type reportMutation struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

// place is where a mutant is: its file in core and its line.
type place struct {
	file string
	line int
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mutation", flag.ContinueOnError)
	fs.SetOutput(stderr)
	files := fs.String("files", `^ticket\.go$`, "regexp of the core files to mutate")
	only := fs.String("checks", "", "comma-separated checks to run (default all)")
	out := fs.String("out", "out/mutation", "folder for gremlins' reports (the table reads every report in it)")
	workers := fs.Int("workers", 1, "gremlins workers")
	reportOnly := fs.Bool("report", false, "only print the table of the reports already in -out")
	memGB := fs.Int("mem-limit-gb", 8, "address-space limit of every test process, in GiB (0: none): a mutant that loops allocating then fails, killed, instead of exhausting the machine")
	weak := fs.Bool("weak", false, "run -checks only over the lines of -out's mutants that fewer than two checks killed (a scratch worktree marks them; gremlins --diff)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *memGB > 0 {
		// The soft limit only, inherited by gremlins, go test and each test binary.
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_AS, &lim); err != nil {
			fmt.Fprintln(stderr, "mutation:", err)
			return 1
		}
		lim.Cur = min(uint64(*memGB)<<30, lim.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
			fmt.Fprintln(stderr, "mutation:", err)
			return 1
		}
	}
	if err := mutate(*files, *only, *out, *workers, *reportOnly, *weak, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "mutation:", err)
		return 1
	}
	return 0
}

func mutate(files, only, out string, workers int, reportOnly, weak bool, stdout, stderr io.Writer) error {
	keep, err := regexp.Compile(files)
	if err != nil {
		return fmt.Errorf("-files: %w", err)
	}
	exclude, err := excludes("core", keep)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("mutation: %w", err)
	}
	var selected []check
	for _, c := range checks {
		if only == "" || strings.Contains(","+only+",", ","+c.name+",") {
			selected = append(selected, c)
		}
	}
	switch {
	case reportOnly:
	case weak:
		t, err := load(out)
		if err != nil {
			return err
		}
		lines := t.weakLines()
		if len(lines) == 0 {
			fmt.Fprintln(stderr, "mutation: every covered mutant in", out, "was killed by two or more checks")
			break
		}
		if err := unleashWeak(selected, exclude, out, lines, workers, stderr); err != nil {
			return err
		}
	default:
		for _, c := range selected {
			if err := unleash(c, exclude, filepath.Join(out, c.name+".json"), workers, "", "", stderr); err != nil {
				return err
			}
		}
	}
	t, err := load(out)
	if err != nil {
		return err
	}
	t.print(stdout)
	return nil
}

// table is what the reports of one folder say: per mutant, the checks that
// killed it.
type table struct {
	names    []string            // checks with a report, in checks' order
	killed   map[string][]string // mutant -> checks that killed it ("check(timeout)" when it timed out)
	covered  map[string]bool     // mutants some check's tests execute
	places   map[string]place    // mutant -> where it is
	timeouts int
}

// load reads every check's reports in dir: <check>.json from a whole run,
// <check>.weak.json from a -weak run over the lines of weak mutants.
func load(dir string) (*table, error) {
	t := &table{killed: map[string][]string{}, covered: map[string]bool{}, places: map[string]place{}}
	for _, c := range checks {
		have := false
		for _, suffix := range []string{".json", ".weak.json"} {
			b, err := os.ReadFile(filepath.Join(dir, c.name+suffix))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("mutation: %w", err)
			}
			var r report
			if err := json.Unmarshal(b, &r); err != nil {
				return nil, fmt.Errorf("mutation: %s%s: %w", c.name, suffix, err)
			}
			have = true
			t.add(c.name, r)
		}
		if have {
			t.names = append(t.names, c.name)
		}
	}
	return t, nil
}

func (t *table) add(check string, r report) {
	for _, f := range r.Files {
		for _, m := range f.Mutations {
			// NOT VIABLE does not build (no mutant); SKIPPED is outside a -weak run's lines.
			if m.Status == "NOT VIABLE" || m.Status == "SKIPPED" {
				continue
			}
			id := fmt.Sprintf("%s:%d:%d %s", f.Name, m.Line, m.Column, m.Type)
			if _, ok := t.killed[id]; !ok {
				t.killed[id] = nil
			}
			t.places[id] = place{f.Name, m.Line}
			if m.Status != "NOT COVERED" {
				t.covered[id] = true
			}
			who := check
			switch m.Status {
			case "KILLED":
			case "TIMED OUT": // the check hung or ran past gremlins' limit: killed, but shown
				who += "(timeout)"
			default:
				continue
			}
			if slices.ContainsFunc(t.killed[id], func(k string) bool { return strings.TrimSuffix(k, "(timeout)") == check }) {
				continue // a -weak run of a check the whole run had
			}
			if m.Status == "TIMED OUT" {
				t.timeouts++
			}
			t.killed[id] = append(t.killed[id], who)
		}
	}
}

// weakLines returns, by file, the lines that hold a covered mutant killed
// by fewer than two checks.
func (t *table) weakLines() map[string][]int {
	set := map[string]map[int]bool{}
	for id, ks := range t.killed {
		if !t.covered[id] || len(ks) >= 2 {
			continue
		}
		p := t.places[id]
		if set[p.file] == nil {
			set[p.file] = map[int]bool{}
		}
		set[p.file][p.line] = true
	}
	out := map[string][]int{}
	for f, ls := range set {
		for n := range ls {
			out[f] = append(out[f], n)
		}
		sort.Ints(out[f])
	}
	return out
}

func (t *table) print(w io.Writer) {
	ids := make([]string, 0, len(t.killed))
	for id := range t.killed {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var by [3]int
	uncovered := 0
	for _, id := range ids {
		ks := t.killed[id]
		who := strings.Join(ks, ",")
		switch {
		case !t.covered[id]:
			uncovered++
			who = "(no check executes it: a constant or dead code)"
		case who == "":
			who = "(survived every check)"
			by[0]++
		default:
			by[min(len(ks), 2)]++
		}
		fmt.Fprintf(w, "%-48s %s\n", id, who)
	}
	fmt.Fprintf(w, "\nchecks: %s\nmutants %d (%d more that no check executes): killed by 0 checks %d, by 1 check %d, by 2 or more %d (%d kills were timeouts)\n",
		strings.Join(t.names, ", "), len(ids)-uncovered, uncovered, by[0], by[1], by[2], t.timeouts)
}

// unleashWeak runs checks over the given lines only: in a scratch worktree
// of HEAD it appends a comment to each line and commits that, so that
// gremlins --diff HEAD~1 mutates those lines and no others (diff.context 0
// keeps each marked line its own hunk: gremlins reads a hunk as one range of
// added lines). Reports go to out as <check>.weak.json.
func unleashWeak(selected []check, exclude, out string, lines map[string][]int, workers int, stderr io.Writer) error {
	if b, err := exec.Command("git", "status", "--porcelain", "--", "core").Output(); err != nil || len(b) > 0 {
		return fmt.Errorf("mutation: -weak mutates HEAD's core, and core has uncommitted changes or git failed (%v)", err)
	}
	absOut, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("mutation: %w", err)
	}
	tmp, err := os.MkdirTemp("", "sluice-mutation-")
	if err != nil {
		return fmt.Errorf("mutation: %w", err)
	}
	defer os.RemoveAll(tmp)
	wt := filepath.Join(tmp, "tree")
	if err := gitRun("", "worktree", "add", "--detach", wt, "HEAD"); err != nil {
		return err
	}
	defer gitRun("", "worktree", "remove", "--force", wt) //nolint:errcheck // best effort: the folder goes with tmp
	for file, ls := range lines {
		if err := mark(filepath.Join(wt, "core", file), ls); err != nil { // reports name files in core
			return err
		}
	}
	if err := gitRun(wt, "-c", "user.name=mutation", "-c", "user.email=mutation@localhost", "commit", "-q", "-a", "-m", "mutation: weak lines"); err != nil {
		return err
	}
	if models, err := filepath.Abs("models"); err == nil { // the conformance check loads ../models from core
		if _, err := os.Stat(models); err == nil {
			if err := os.Symlink(models, filepath.Join(wt, "models")); err != nil {
				return fmt.Errorf("mutation: %w", err)
			}
		}
	}
	n := 0
	for _, ls := range lines {
		n += len(ls)
	}
	fmt.Fprintf(stderr, "mutation: -weak: %d lines in %d files\n", n, len(lines))
	for _, c := range selected {
		if err := unleash(c, exclude, filepath.Join(absOut, c.name+".weak.json"), workers, wt, "HEAD~1", stderr); err != nil {
			return err
		}
	}
	return nil
}

// mark appends a comment to each given line (1-based) of path.
func mark(path string, lines []int) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("mutation: %w", err)
	}
	src := strings.Split(string(b), "\n")
	for _, n := range lines {
		if n < 1 || n > len(src) {
			return fmt.Errorf("mutation: %s has no line %d", path, n)
		}
		src[n-1] += " // mutation: weak"
	}
	if err := os.WriteFile(path, []byte(strings.Join(src, "\n")), 0o644); err != nil {
		return fmt.Errorf("mutation: %w", err)
	}
	return nil
}

func gitRun(dir string, args ...string) error {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mutation: git %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

// unleash runs gremlins over core for one check, writing its report to
// path; dir is the module to run in ("" for this one, an absolute path for
// another), diff gremlins' --diff reference ("" for none).
func unleash(c check, exclude, path string, workers int, dir, diff string, stderr io.Writer) error {
	pkg := "./core"
	if dir != "" {
		// gremlins names files relative to the package it mutates and reads
		// git diff's names in its working folder: run it in core, with
		// diff.relative, so the two agree.
		dir = filepath.Join(dir, "core")
		pkg = dir
	}
	args := []string{"run", gremlins, "unleash", pkg, "--exclude-files", exclude, "--output", path,
		"--workers", fmt.Sprint(workers), "--timeout-coefficient", "20", "--silent"}
	if c.tags != "" {
		args = append(args, "--tags", c.tags)
	}
	if diff != "" {
		args = append(args, "--diff", diff)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	// diff.context and diff.relative: see unleashWeak and above.
	cmd.Env = append(append(os.Environ(), "GOFLAGS="+c.goflags, "GIT_CONFIG_COUNT=2",
		"GIT_CONFIG_KEY_0=diff.context", "GIT_CONFIG_VALUE_0=0", "GIT_CONFIG_KEY_1=diff.relative", "GIT_CONFIG_VALUE_1=true"), c.env...)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	fmt.Fprintf(stderr, "mutation: check %s (GOFLAGS=%s)\n", c.name, c.goflags)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("gremlins for %s: %w", c.name, err)
	}
	return nil
}

// excludes returns gremlins' --exclude-files regexp for the files of dir
// that keep does not match, and every package below dir (gremlins matches
// paths relative to the package it mutates).
func excludes(dir string, keep *regexp.Regexp) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("mutation: %w", err)
	}
	parts := []string{"^[a-z]+/"}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || keep.MatchString(n) {
			continue
		}
		parts = append(parts, "^"+regexp.QuoteMeta(n)+"$")
	}
	return strings.Join(parts, "|"), nil
}
