// Command mutation is `make mutation`: go-gremlins (v0.6.0) mutates core
// once per independent check, each check being its own test command (core's
// unit tests, rapid, the model checker at the make-test bound, a simulator
// campaign, the conformance suite in process; the last three are
// core/checks_test.go, built with the sluice_checks tag). It then prints,
// for every mutant, which checks killed it, and one table: mutants, killed
// by 0, 1 and 2 or more checks.
//
// A full run over core is about 900 mutants times five checks (hours on
// two cores), so -files picks the files of core to mutate (a regexp on the
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

// A check is one test command: the GOFLAGS that select its tests.
type check struct {
	name, goflags string
}

var checks = [...]check{
	{"unit", "-skip=Rapid|TestCheck"},
	{"rapid", "-run=Rapid"},
	{"model", "-run=^TestCheckModel$"},
	{"sim", "-run=^TestCheckSim$"},
	{"conformance", "-run=^TestCheckConformance$"},
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
	killed := map[string][]string{} // mutant -> checks that killed it
	var names []string
	for _, c := range checks {
		if *only != "" && !strings.Contains(","+*only+",", ","+c.name+",") {
			continue
		}
		names = append(names, c.name)
		path := filepath.Join(*out, c.name+".json")
		cmd := exec.Command("go", "run", gremlins, "unleash", "./core", "--tags", "sluice_checks",
			"--exclude-files", exclude, "--output", path, "--workers", fmt.Sprint(*workers), "--timeout-coefficient", "5", "--silent")
		cmd.Env = append(os.Environ(), "GOFLAGS="+c.goflags)
		cmd.Stdout, cmd.Stderr = stderr, stderr
		fmt.Fprintf(stderr, "mutation: check %s (GOFLAGS=%s)\n", c.name, c.goflags)
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(stderr, "mutation: gremlins for %s: %v\n", c.name, err)
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
				if _, ok := killed[id]; !ok {
					killed[id] = nil
				}
				if m.Status == "KILLED" || m.Status == "TIMED OUT" {
					killed[id] = append(killed[id], c.name)
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
	for _, id := range ids {
		ks := killed[id]
		by[min(len(ks), 2)]++
		who := strings.Join(ks, ",")
		if who == "" {
			who = "(survived every check)"
		}
		fmt.Fprintf(stdout, "%-48s %s\n", id, who)
	}
	fmt.Fprintf(stdout, "\nchecks: %s\nmutants %d: killed by 0 checks %d, by 1 check %d, by 2 or more %d\n",
		strings.Join(names, ", "), len(ids), by[0], by[1], by[2])
	return 0
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
