package conformance

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/internal/baseurl"
)

const usageText = `usage: sluice conformance [flags]

Runs the conformance suite (CONTRACT.md's matrices as cases) against a
Sluice server and prints one table per matrix: case, verdict, time, cells.
It exits 1 when a case fails or a history is not linearizable.

  --target URL     server for the cases without their own: a URL, or
                   host:port for http://host:port (started with
                   --parallel-jobs --ui-management --fixture); default: the
                   runner starts one (in-process, or from --binary)
  --binary PATH    start the servers the runner needs from this sluice
                   binary instead of in-process (cases that stop or
                   restart the server, need other flags, or send signals)
  --run REGEX      only cases whose name or cell matches
  --json FILE      also write the report as JSON
  --lin N          random concurrent HTTP histories checked with porcupine
                   (default 5; 0: none)
  --out DIR        where a non-linearizable history's HTML visualization
                   goes (default: the temporary folder)
  --mutants LIST   run everything once per planted core bug (comma-separated
                   names, or "all") on servers started from --binary with
                   SLUICE_MUTANTS, and print which cells caught which
                   mutant; exits 1 when a mutant is not caught
  --parallel N     cases at once (default 8)
  --step-timeout D bound of every wait of a step (default 15s)
  --slack F        multiplies the time bounds cases state (default 1)
  --models-root DIR  the real engines' models root, for the cases whose
                   server serves them (default $SLUICE_MODELS_ROOT, else
                   ./models when it exists; without one they are skipped)
  --matrices DIR   read the matrices from DIR instead of the built-in ones
  --list           list the cases and the cells they cover, run nothing
`

// Main is `sluice conformance`: it parses args, runs the suite and returns
// the exit code (0: everything passed; 1: a failure; 2: bad usage).
// Servers started in this process (without --binary) are built by build
// (conformance/inproc.Build; the caller wires it in).
func Main(args []string, stdout, stderr io.Writer, build Builder) int {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usageText) }
	target := fs.String("target", "", "")
	binary := fs.String("binary", "", "")
	run := fs.String("run", "", "")
	jsonFile := fs.String("json", "", "")
	lin := fs.Int("lin", 5, "")
	out := fs.String("out", "", "")
	mutants := fs.String("mutants", "", "")
	parallel := fs.Int("parallel", 8, "")
	stepTimeout := fs.Duration("step-timeout", 15*time.Second, "")
	slack := fs.Float64("slack", 1, "")
	matrices := fs.String("matrices", "", "")
	modelsRoot := fs.String("models-root", DefaultModelsRoot("models"), "")
	list := fs.Bool("list", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice conformance: unexpected arguments %q\n", fs.Args())
		return 2
	}
	var suite *Suite
	var err error
	if *matrices != "" {
		suite, err = LoadDir(*matrices)
	} else {
		suite, err = Load()
	}
	if err != nil {
		fmt.Fprintln(stderr, "sluice conformance:", err)
		return 1
	}
	if *target != "" {
		t, err := baseurl.Parse(*target)
		if err != nil {
			fmt.Fprintln(stderr, "sluice conformance: --target:", err)
			return 2
		}
		*target = t
	}
	o := Options{Target: *target, Parallel: *parallel, StepTimeout: *stepTimeout, Slack: *slack,
		ModelsRoot: *modelsRoot}
	if *run != "" {
		if o.Run, err = regexp.Compile(*run); err != nil {
			fmt.Fprintln(stderr, "sluice conformance: --run:", err)
			return 2
		}
	}
	if *list {
		for _, c := range suite.Select(o.Run) {
			fmt.Fprintf(stdout, "%-52s %s\n", c.Name, strings.Join(c.Cells(), " "))
		}
		return 0
	}
	if *binary != "" {
		o.Launcher = Binary{Path: *binary}
		o.Binary = o.Launcher
	} else {
		o.Launcher = InProcess{Build: build}
	}
	if *mutants != "" {
		if o.Target != "" || *binary == "" {
			fmt.Fprintln(stderr, "sluice conformance: --mutants needs --binary PATH and no --target: it starts every "+
				"server itself, each a process of its own, since a planted bug may crash the server")
			return 2
		}
		return runMutants(suite, o, *mutants, *binary, *lin, *out, stdout, stderr)
	}
	rep, err := suite.Run(o)
	if err != nil {
		fmt.Fprintln(stderr, "sluice conformance:", err)
		return 1
	}
	if *lin > 0 {
		url := o.Target
		if url == "" {
			inst, err := o.Launcher.Start(ServerSpec{})
			if err != nil {
				fmt.Fprintln(stderr, "sluice conformance:", err)
				return 1
			}
			defer func() { _ = inst.Close() }()
			url = inst.URL()
		}
		lr := RunLin(LinOptions{Target: url, Histories: *lin, OutDir: *out, Tag: NewRunTag()})
		rep.Lin = &lr
	}
	rep.WriteTable(stdout, suite)
	if *jsonFile != "" {
		if err := rep.WriteJSON(*jsonFile); err != nil {
			fmt.Fprintln(stderr, "sluice conformance:", err)
			return 1
		}
	}
	if !rep.OK() {
		return 1
	}
	return 0
}

// UnreachableMutants are planted bugs no HTTP client can trigger, with the
// reason; they are reported, not required to be caught.
var UnreachableMutants = map[string]string{
	"double_release": "the runtime releases each lease once (Lease.Release is idempotent) and never passes a stale ticket to core.Release, so the bug cannot be reached through the API",
}

// MutantResult says which cases (and cells) caught one planted bug.
type MutantResult struct {
	Mutant string   `json:"mutant"`
	Cases  []string `json:"cases"`
	Cells  []string `json:"cells"`
	Lin    bool     `json:"linearizability"`
}

// Caught reports whether anything failed under the mutant.
func (m *MutantResult) Caught() bool { return len(m.Cases) > 0 || m.Lin }

// RunMutants runs the selected cases (and lin histories) once per mutant
// on servers started with SLUICE_MUTANTS set: from the binary when
// o.Launcher is one (the right choice: the runtime panics on some planted
// bugs, which must crash only the server), else in-process (the variable is
// set in this process for the round, and the InProcess launcher's Build
// builds each server). The core's invariant checks stay off, so only the
// suite can notice.
func RunMutants(suite *Suite, o Options, mutants []core.Mutants, lin int, outDir string, progress io.Writer) ([]MutantResult, error) {
	_, isBinary := o.Launcher.(Binary)
	if !isBinary {
		prev, had := os.LookupEnv(runtime.MutantsEnv)
		defer func() {
			if had {
				_ = os.Setenv(runtime.MutantsEnv, prev)
			} else {
				_ = os.Unsetenv(runtime.MutantsEnv)
			}
		}()
	}
	var res []MutantResult
	for _, mu := range mutants {
		name := mu.String()
		ro := o
		if b, ok := o.Launcher.(Binary); ok {
			b.Env = append(append([]string(nil), b.Env...), runtime.MutantsEnv+"="+name)
			ro.Launcher, ro.Binary = b, b
		} else {
			if err := os.Setenv(runtime.MutantsEnv, name); err != nil {
				return res, fmt.Errorf("conformance: %w", err)
			}
			ip, _ := o.Launcher.(InProcess)
			ro.Launcher = InProcess{Build: ip.Build}
		}
		start := time.Now()
		rep, err := suite.Run(ro)
		if err != nil {
			return res, err
		}
		mr := MutantResult{Mutant: name}
		for _, x := range rep.Failed() {
			mr.Cases = append(mr.Cases, x.Case)
			mr.Cells = append(mr.Cells, x.Cells()...)
		}
		mr.Cells = uniq(mr.Cells)
		if lin > 0 {
			inst, err := ro.Launcher.Start(ServerSpec{})
			if err != nil {
				return res, err
			}
			lr := RunLin(LinOptions{Target: inst.URL(), Histories: lin, OutDir: outDir, Tag: NewRunTag()})
			_ = inst.Close()
			mr.Lin = !lr.OK()
		}
		if progress != nil {
			fmt.Fprintf(progress, "mutant %-20s %d cases failed, lin caught=%v (%s)\n", name, len(mr.Cases), mr.Lin, time.Since(start).Round(time.Second))
		}
		res = append(res, mr)
	}
	return res, nil
}

func runMutants(suite *Suite, o Options, list, binary string, lin int, out string, stdout, stderr io.Writer) int {
	var mus []core.Mutants
	if list == "all" {
		mus = core.AllMutants()
	} else {
		for _, n := range strings.Split(list, ",") {
			m, ok := core.ParseMutant(strings.TrimSpace(n))
			if !ok {
				fmt.Fprintf(stderr, "sluice conformance: unknown mutant %q\n", n)
				return 2
			}
			mus = append(mus, m)
		}
	}
	o.StepTimeout = min(o.StepTimeout, 5*time.Second) // a mutant hangs waits: keep each short
	res, err := RunMutants(suite, o, mus, lin, out, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sluice conformance:", err)
		return 1
	}
	WriteMutantTable(stdout, res)
	for _, r := range res {
		if _, skip := UnreachableMutants[r.Mutant]; !r.Caught() && !skip {
			return 1
		}
	}
	return 0
}

// WriteMutantTable prints which cells caught which mutant.
func WriteMutantTable(w io.Writer, res []MutantResult) {
	fmt.Fprintf(w, "%-20s %-7s %-6s %s\n", "MUTANT", "CAUGHT", "CASES", "CELLS (and linearizability)")
	for _, r := range res {
		cells := strings.Join(r.Cells, " ")
		if r.Lin {
			cells = strings.TrimSpace(cells + " +linearizability")
		}
		caught := "no"
		if r.Caught() {
			caught = "yes"
		} else if why, ok := UnreachableMutants[r.Mutant]; ok {
			cells = "(unreachable over HTTP: " + why + ")"
		}
		fmt.Fprintf(w, "%-20s %-7s %-6d %s\n", r.Mutant, caught, len(r.Cases), cells)
	}
}
