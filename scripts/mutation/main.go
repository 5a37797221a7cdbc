// Command mutation is `make mutation`: go-gremlins (v0.6.0) mutates core
// once per independent check, each check being its own test command (core's
// unit tests, rapid, the model checker at the make-test bound, a simulator
// campaign, the conformance suite in process; the last three are
// core/checks_test.go, built with the sluice_checks tag). It then prints,
// for every mutant, which checks killed it, and one table: mutants, killed
// by 0, 1 and 2 or more checks.
//
// A full run over core is 667 mutants times five checks (about 10 hours
// on two cores), so -files picks the files of core to mutate (a regexp on the
// file name; default ticket.go, 22 mutants, about 20 minutes).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
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
	// rapid at make test's 5000 checks (gremlins passes no test flags).
	{"rapid", "-run=Rapid", "", []string{"SLUICE_RAPID_CHECKS=5000"}},
	{"model", "-run=^TestCheckModel$", "sluice_checks", nil},
	{"sim", "-run=^TestCheckSim$", "sluice_checks", nil},
	{"conformance", "-run=^TestCheckConformance$", "sluice_checks", nil},
}

// report is the part of gremlins' JSON output (-o) read here.
type report struct {
	Files []struct {
		Name      string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mutation", flag.ContinueOnError)
	fs.SetOutput(stderr)
	files := fs.String("files", `^ticket\.go$`, "regexp of the core files to mutate")
	only := fs.String("checks", "", "comma-separated checks to run (default all)")
	out := fs.String("out", "out/mutation", "folder for gremlins' reports")
	workers := fs.Int("workers", 1, "gremlins workers")
	reportOnly := fs.Bool("report", false, "only print the table of the reports already in -out")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	keep, err := regexp.Compile(*files)
	if err != nil {
		fmt.Fprintln(stderr, "mutation:", err)
		return 2
	}
	exclude, err := excludes("core", keep)
	if err != nil {
		fmt.Fprintln(stderr, "mutation:", err)
		return 1
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(stderr, "mutation:", err)
		return 1
	}
	killed := map[string][]string{} // mutant -> checks that killed it ("check(timeout)" when it timed out)
	timeouts := 0
	covered := map[string]bool{} // mutants some check's tests execute
	var names []string
	for _, c := range checks {
		if *only != "" && !strings.Contains(","+*only+",", ","+c.name+",") {
			continue
		}
		names = append(names, c.name)
		path := filepath.Join(*out, c.name+".json")
		if *reportOnly {
			if _, err := os.Stat(path); err != nil {
				continue
			}
		} else if err := unleash(c, exclude, path, *workers, stderr); err != nil {
			fmt.Fprintln(stderr, "mutation:", err)
			return 1
		}
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(stderr, "mutation:", err)
			return 1
		}
		var r report
		if err := json.Unmarshal(b, &r); err != nil {
			fmt.Fprintln(stderr, "mutation:", err)
			return 1
		}
		for _, f := range r.Files {
			for _, m := range f.Mutations {
				id := fmt.Sprintf("%s:%d:%d %s", f.Name, m.Line, m.Column, m.Type)
				if m.Status == "NOT VIABLE" { // does not build: no mutant
					continue
				}
				if _, ok := killed[id]; !ok {
					killed[id] = nil
				}
				if m.Status != "NOT COVERED" {
					covered[id] = true
				}
				switch m.Status {
				case "KILLED":
					killed[id] = append(killed[id], c.name)
				case "TIMED OUT": // the check hung or ran past gremlins' limit: killed, but shown
					killed[id] = append(killed[id], c.name+"(timeout)")
					timeouts++
				}
			}
		}
	}
	ids := make([]string, 0, len(killed))
	for id := range killed {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var by [3]int
	uncovered := 0
	for _, id := range ids {
		ks := killed[id]
		who := strings.Join(ks, ",")
		switch {
		case !covered[id]:
			uncovered++
			who = "(no check executes it: a constant or dead code)"
		case who == "":
			who = "(survived every check)"
			by[0]++
		default:
			by[min(len(ks), 2)]++
		}
		fmt.Fprintf(stdout, "%-48s %s\n", id, who)
	}
	fmt.Fprintf(stdout, "\nchecks: %s\nmutants %d (%d more that no check executes): killed by 0 checks %d, by 1 check %d, by 2 or more %d (%d kills were timeouts)\n",
		strings.Join(names, ", "), len(ids)-uncovered, uncovered, by[0], by[1], by[2], timeouts)
	return 0
}

// unleash runs gremlins over core for one check, writing its report to path.
func unleash(c check, exclude, path string, workers int, stderr io.Writer) error {
	args := []string{"run", gremlins, "unleash", "./core", "--exclude-files", exclude, "--output", path,
		"--workers", fmt.Sprint(workers), "--timeout-coefficient", "20", "--silent"}
	if c.tags != "" {
		args = append(args, "--tags", c.tags)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(append(os.Environ(), "GOFLAGS="+c.goflags), c.env...)
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
