// Command benchall is `make bench-all`: it runs every bench-* target of the
// Makefile (found by name, so a target added later joins by itself), one
// after another, and writes docs/benchmarks.md: the machine, the date, the
// commit, a summary of each figure beside its baseline from the same run,
// and every target's own output.
//
// -quick passes small sizes to the targets that take them (see quickVars);
// targets that take none run at their defaults. Each target is bounded by
// -timeout; a failed target is recorded as failed and the run goes on, and
// the command then exits non-zero.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// quickVars are the make variables -quick sets: one count or round where a
// target repeats, a short window where it measures over time.
var quickVars = []string{
	"BENCH_COUNT=1", "RUNTIME_COUNT=1", "ENGINES_BENCHTIME=8x", "SILERO_ROUNDS=1", "SILERO_BENCHTIME=24x",
	"BENCHHTTP_ARGS=-rounds 2 -d 1s -warmup 500ms",
	"PEERS_WINDOW=1s", "PEERS_BURST=12", "PEERS_SEQ=40",
}

func main() {
	makefile := flag.String("makefile", "Makefile", "the Makefile whose bench-* targets run")
	out := flag.String("out", "docs/benchmarks.md", "the generated report")
	quick := flag.Bool("quick", false, "small sizes (see quickVars)")
	timeout := flag.Duration("timeout", 45*time.Minute, "bound of each target")
	only := flag.String("only", "", "comma-separated targets to run (default: every bench-* target)")
	flag.Parse()
	if err := run(*makefile, *out, *quick, *timeout, *only); err != nil {
		fmt.Fprintln(os.Stderr, "benchall:", err)
		os.Exit(1)
	}
}

func run(makefile, out string, quick bool, timeout time.Duration, only string) error {
	mk, err := os.ReadFile(makefile)
	if err != nil {
		return err
	}
	targets := benchTargets(string(mk))
	if only != "" {
		targets = filter(targets, strings.Split(only, ","))
	}
	if len(targets) == 0 {
		return errors.New("no bench-* targets to run")
	}
	rep := report{quick: quick, start: time.Now().UTC(), machine: machine(), commit: gitCommit(), loadStart: loadAverage()}
	var failed []string
	for _, t := range targets {
		fmt.Fprintf(os.Stderr, "benchall: make %s\n", t)
		r := runTarget(t, quick, timeout)
		if r.err != nil {
			failed = append(failed, t)
			fmt.Fprintf(os.Stderr, "benchall: make %s failed: %v\n", t, r.err)
		}
		rep.runs = append(rep.runs, r)
	}
	rep.loadEnd = loadAverage()
	if err := os.WriteFile(out, []byte(rep.markdown()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "benchall: wrote %s\n", out)
	if len(failed) > 0 {
		return fmt.Errorf("failed targets: %s", strings.Join(failed, ", "))
	}
	return nil
}

var targetLine = regexp.MustCompile(`(?m)^(bench(?:-[A-Za-z0-9_-]+)?):`)

// benchTargets returns the Makefile's bench and bench-* targets in file
// order, without bench-all itself.
func benchTargets(mk string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range targetLine.FindAllStringSubmatch(mk, -1) {
		if t := m[1]; t != "bench-all" && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

func filter(targets, keep []string) []string {
	var out []string
	for _, t := range targets {
		for _, k := range keep {
			if t == strings.TrimSpace(k) {
				out = append(out, t)
			}
		}
	}
	return out
}

// targetRun is one target's output and outcome.
type targetRun struct {
	target string
	output string
	took   time.Duration
	err    error
}

func runTarget(t string, quick bool, timeout time.Duration) targetRun {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := []string{"--no-print-directory", t}
	if quick {
		args = append(args, quickVars...)
	}
	cmd := exec.CommandContext(ctx, "make", args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	t0 := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w after %v", ctx.Err(), timeout)
	}
	return targetRun{target: t, output: buf.String(), took: time.Since(t0), err: err}
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if l, _, ok := strings.Cut(string(b), "\n"); ok {
			mem = ", " + strings.Join(strings.Fields(l)[1:], " ") + " memory"
		}
	}
	return fmt.Sprintf("%s, %d CPUs%s, %s/%s, %s", cpu, runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func gitCommit() string {
	b, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	s := strings.TrimSpace(string(b))
	// The report itself (an earlier run's) does not count as a change.
	if d, err := exec.Command("git", "status", "--porcelain", "--", ".", ":(exclude)docs/benchmarks.md").Output(); err == nil && len(bytes.TrimSpace(d)) > 0 {
		s += " (with uncommitted changes)"
	}
	return s
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
