// Command edgemutants is `make edge-mutants`: the serving edge's test net
// (issue "server/ as packages", step 0). It plants hand-written mutants
// (mutants.go), one at a time, in a scratch copy of the module, and runs
// each independent check against it: the server package's tests, the
// conformance suite in process, and optionally the server's race tests
// and the SDK tests. It prints, per mutant, which checks killed it, and
// one table of mutants killed by 0, 1 and 2 or more checks per area.
//
// The mutants target what only a slow, faulty or hostile peer reveals,
// where go-gremlins' operator mutations (arithmetic, comparisons) rarely
// reach: deadlines re-armed per write, body budgets returned on every
// path, Host and Origin checks on every state-changing entry, a failed
// durable write never answered 200, and authorization on every protocol's
// management routes. Each mutant is a small textual edit, like a bug a
// refactor could plant; the edit must match its file exactly once, so a
// mutant that no longer applies fails the run instead of passing silently.
//
// About 80 s per mutant and check on 2 cores (the server package's tests
// dominate); -run picks mutants by name, -checks the checks.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// A check is one test command run in the scratch copy.
type check struct {
	name string
	args []string
	env  []string
}

var allChecks = []check{
	{name: "server", args: []string{"test", "-count=1", "./server/", "./server/internal/..."}},
	{name: "conformance", args: []string{"test", "-count=1", "-run", "^TestConformance$", "./conformance/"}},
	{name: "race", args: []string{"test", "-race", "-count=1", "./server/", "./server/internal/..."}},
	{name: "sdk", args: []string{"test", "-count=1", "./server/sdktest/"}},
}

func main() {
	run := flag.String("run", "", "regexp: only the mutants whose name matches")
	checksFlag := flag.String("checks", "server,conformance", "comma-separated checks: "+checkNames())
	timeout := flag.Duration("timeout", 6*time.Minute, "a check that runs longer kills the mutant (it hung)")
	list := flag.Bool("list", false, "list the mutants and check that each applies, then exit")
	tests := flag.String("tests", "", "regexp: each check runs only these tests (go test -run), to show that one new test kills its mutant")
	flag.Parse()
	if err := mainErr(*run, *checksFlag, *tests, *timeout, *list); err != nil {
		fmt.Fprintln(os.Stderr, "edgemutants:", err)
		os.Exit(1)
	}
}

func checkNames() string {
	var n []string
	for _, c := range allChecks {
		n = append(n, c.name)
	}
	return strings.Join(n, ",")
}

func mainErr(run, checksFlag, tests string, timeout time.Duration, list bool) error {
	re, err := regexp.Compile(run)
	if err != nil {
		return fmt.Errorf("-run: %w", err)
	}
	var checks []check
	for _, name := range strings.Split(checksFlag, ",") {
		i := slices.IndexFunc(allChecks, func(c check) bool { return c.name == name })
		if i < 0 {
			return fmt.Errorf("-checks: no check %q (have %s)", name, checkNames())
		}
		c := allChecks[i]
		if tests != "" {
			c.args = withRun(c.args, tests)
		}
		checks = append(checks, c)
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	var picked []mutant
	for _, m := range mutants {
		if re.MatchString(m.name) {
			if err := m.check(root); err != nil {
				return err
			}
			picked = append(picked, m)
		}
	}
	if list {
		for _, m := range picked {
			fmt.Printf("%-34s %-10s %s\n", m.name, m.area, m.why)
		}
		return nil
	}
	scratch, err := copyModule(root)
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	fmt.Printf("edgemutants: %d mutants x %d checks in %s\n", len(picked), len(checks), scratch)
	// Each check must pass on the unmutated copy, or its kills mean nothing.
	for _, c := range checks {
		if ok, out := runCheck(scratch, c, timeout); !ok {
			return fmt.Errorf("check %s fails without a mutant:\n%s", c.name, tail(out, 40))
		}
	}
	var results []result
	for _, m := range picked {
		restore, err := m.apply(scratch)
		if err != nil {
			return err
		}
		r := result{m: m}
		if out, err := build(scratch); err != nil {
			_ = restore()
			return fmt.Errorf("mutant %s does not compile (fix the mutant: a build failure is no kill):\n%s", m.name, tail(out, 20))
		}
		for _, c := range checks {
			start := time.Now()
			ok, out := runCheck(scratch, c, timeout)
			if !ok {
				r.killedBy = append(r.killedBy, c.name)
			}
			fmt.Printf("  %-34s %-12s %-8s %5.0fs %s\n", m.name, c.name, map[bool]string{true: "survived", false: "killed"}[ok], time.Since(start).Seconds(), failedTests(out))
		}
		if err := restore(); err != nil {
			return err
		}
		results = append(results, r)
	}
	printTable(os.Stdout, results, checks)
	return nil
}

// withRun returns the go test arguments args with -run re instead of
// their own -run, if any.
func withRun(args []string, re string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "-run" {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return append(out[:2:2], append([]string{"-run", re}, out[2:]...)...)
}

type result struct {
	m        mutant
	killedBy []string
}

// build compiles every package and test of the copy in dir.
func build(dir string) (string, error) {
	cmd := exec.Command("go", "vet", "./server/...", "./conformance/...")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runCheck runs c in dir; it reports whether the tests passed.
func runCheck(dir string, c check, timeout time.Duration) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", c.args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), c.env...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return false, string(out) + "\n(timed out)"
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return false, err.Error()
	}
	return err == nil, string(out)
}

// failedTests names the innermost failed tests in go test's output (the
// tests that killed a mutant), or says what else failed.
func failedTests(out string) string {
	var names []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if n, ok := strings.CutPrefix(l, "--- FAIL: "); ok {
			n, _, _ = strings.Cut(n, " ")
			// A parent fails with its subtest: keep the subtest only.
			if k := len(names); k > 0 && strings.HasPrefix(n, names[k-1]+"/") {
				names[k-1] = n
				continue
			}
			names = append(names, n)
		}
	}
	switch {
	case len(names) > 0:
		return strings.Join(names, " ")
	case strings.Contains(out, "(timed out)"):
		return "(timed out)"
	}
	return ""
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// copyModule copies the tracked files of the module at root into a
// temporary folder, with the ignored dependency folders (.deps, models,
// ...) linked, so that a mutant never touches the working tree.
func copyModule(root string) (string, error) {
	dir, err := os.MkdirTemp("", "sluice-edgemutants-")
	if err != nil {
		return "", err
	}
	files, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		return "", fmt.Errorf("git ls-files: %w", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		if err := copyFile(filepath.Join(root, f), filepath.Join(dir, f)); err != nil {
			return "", err
		}
	}
	// The ignored folders the tests read (.deps, models, models-sherpa,
	// ...): every ignored top-level entry but build outputs.
	ignored, err := exec.Command("git", "-C", root, "ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z").Output()
	if err != nil {
		return "", fmt.Errorf("git ls-files --ignored: %w", err)
	}
	linked := map[string]bool{"bin": true, "out": true}
	for _, p := range strings.Split(strings.TrimRight(string(ignored), "\x00"), "\x00") {
		top := strings.SplitN(strings.TrimSuffix(p, "/"), "/", 2)[0]
		if top == "" || linked[top] {
			continue
		}
		linked[top] = true
		// A top-level folder that git tracks was copied already: its
		// ignored files inside (a test binary, say) are not needed.
		if err := os.Symlink(filepath.Join(root, top), filepath.Join(dir, top)); err != nil && !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	return dir, nil
}

func copyFile(from, to string) error {
	st, err := os.Lstat(from)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // deleted in the working tree, not yet in git
		}
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	if st.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(from)
		if err != nil {
			return err
		}
		return os.Symlink(target, to)
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// printTable prints each mutant's killers, then the 0/1/2+ table per area.
func printTable(w io.Writer, results []result, checks []check) {
	fmt.Fprintf(w, "\n| mutant | area | killed by |\n|---|---|---|\n")
	for _, r := range results {
		k := strings.Join(r.killedBy, ", ")
		if k == "" {
			k = "**none**"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", r.m.name, r.m.area, k)
	}
	type row struct{ n, k0, k1, k2 int }
	byArea := map[string]*row{}
	var areas []string
	total := &row{}
	for _, r := range results {
		a := byArea[r.m.area]
		if a == nil {
			a = &row{}
			byArea[r.m.area] = a
			areas = append(areas, r.m.area)
		}
		for _, x := range []*row{a, total} {
			x.n++
			switch len(r.killedBy) {
			case 0:
				x.k0++
			case 1:
				x.k1++
			default:
				x.k2++
			}
		}
	}
	var names []string
	for _, c := range checks {
		names = append(names, c.name)
	}
	fmt.Fprintf(w, "\nchecks: %s\n\n| area | mutants | killed by 0 | by 1 | by 2+ |\n|---|---|---|---|---|\n", strings.Join(names, ", "))
	for _, a := range areas {
		x := byArea[a]
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d |\n", a, x.n, x.k0, x.k1, x.k2)
	}
	fmt.Fprintf(w, "| all | %d | %d | %d | %d |\n", total.n, total.k0, total.k1, total.k2)
}
