package engines

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/backends/internal/childload"
)

// Bounded native memory under load/unload churn (CONTRACT.md
// engine.native-memory). A cycle opens a one-slot pool of a checkpoint,
// answers one request and closes the pool; the process's resident set
// after Early cycles and after Cycles must keep a ratio of at most
// MaxChurnRatio. `make soak-engines` runs the long form (10 and 200
// cycles); ShortChurn, the conformance case, runs the short form
// (ShortChurnEarly and ShortChurnCycles) in a child process, so the
// resident set is the churn's alone, not the conformance runner's with its
// other cases. Both run the checkpoints one after another in one process,
// as a server holds them: a checkpoint's ratio is over a resident set that
// holds the engines before it, which damps the noise a small process's
// few MB of Go runtime make.

// Churn sizes: the short form of the conformance case (the long form's
// are the flags of sluice-soak-engines). The short form costs about 32
// CPU-s over the default root, pocketsphinx's loads most of it (about 1 s
// a cycle).
const (
	MaxChurnRatio    = 1.2
	ShortChurnEarly  = 5
	ShortChurnCycles = 25
)

// ChurnRow is one checkpoint's churn: the resident set after Early cycles
// and after Cycles, in MB.
type ChurnRow struct {
	Checkpoint      string
	Early, Cycles   int
	EarlyMB, LastMB float64
}

// Ratio is LastMB / EarlyMB.
func (r ChurnRow) Ratio() float64 {
	if r.EarlyMB <= 0 {
		return 0
	}
	return r.LastMB / r.EarlyMB
}

// String is the row as the soak prints it.
func (r ChurnRow) String() string {
	return fmt.Sprintf("%s: RSS %.0f MB after %d cycles, %.0f MB after %d (%.2fx)", r.Checkpoint, r.EarlyMB, r.Early, r.LastMB, r.Cycles, r.Ratio())
}

// RSSMB is this process's resident set (VmRSS) in MB, 0 where
// /proc/self/status cannot say.
func RSSMB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// Churn runs cycles load/unload cycles of spec on eng in this process
// (each opens a one-slot pool, serves req, closes it) and returns the
// resident set after early cycles and after the last.
func Churn(ctx context.Context, name string, eng backends.Engine, spec backends.Spec, req backends.Request, early, cycles int) (ChurnRow, error) {
	if early < 1 || cycles <= early {
		return ChurnRow{}, errors.New("engines: churn needs 1 <= early < cycles")
	}
	row := ChurnRow{Checkpoint: name, Early: early, Cycles: cycles}
	for i := 1; i <= cycles; i++ {
		if err := cycle(ctx, eng, spec, req); err != nil {
			return row, fmt.Errorf("%s cycle %d: %w", name, i, err)
		}
		if i == early {
			row.EarlyMB = settledRSSMB()
		}
	}
	row.LastMB = settledRSSMB()
	return row, nil
}

// settledRSSMB is RSSMB after a garbage collection that returns the Go
// heap's free pages: Go's garbage between collections (its heap may grow
// to twice the live heap before one) is not a leak, and in a small child
// it moved the ratio by up to 0.18 (flite: 15 -> 17 MB); what stays is
// native memory and live Go memory, which a leak grows.
func settledRSSMB() float64 {
	debug.FreeOSMemory()
	return RSSMB()
}

// cycle opens a one-slot pool, serves req and closes the pool.
func cycle(ctx context.Context, eng backends.Engine, spec backends.Spec, req backends.Request) error {
	p, err := OpenPool(ctx, eng, spec)
	if err != nil {
		return err
	}
	_, err = p.Serve(ctx, []backends.Request{req}, []int{0})
	p.Close(ctx)
	return err
}

// ChurnTarget is one checkpoint a churn child churns.
type ChurnTarget struct {
	Checkpoint string          // the row's name
	Spec       backends.Spec   // Spec.Engine names one of churnEngines
	Input      json.RawMessage // the request's input
	Data       []byte          // and its payload
}

// ChurnJob is one churn child's work, sent on its standard input: every
// target in turn, Cycles cycles each.
type ChurnJob struct {
	Targets       []ChurnTarget
	Early, Cycles int
}

// churnEngines are the engines a churn child can run: the real ones, and
// the fixture, whose leak_kb option is how the check shows it can fail.
func churnEngines() backends.Registry {
	reg := Registry(Config{})
	reg[fixture.Name] = fixture.New()
	return reg
}

// churnChild serves a churn child: this executable re-executed with the
// variable set, before main or TestMain run in any binary that links this
// package. It reads a ChurnJob from its standard input and writes its
// ChurnRow to its standard output.
// Its timeout only guards against a hang: the churn is CPU-bound and, at
// low priority beside a busy suite, may wait long for a core.
var churnChild = &childload.Prober{Env: "SLUICE_ENGINE_CHURN_CHILD", Timeout: 30 * time.Minute}

func init() { churnChild.Serve(churnMain) }

func churnMain(string) int {
	var job ChurnJob
	if err := json.NewDecoder(os.Stdin).Decode(&job); err != nil {
		fmt.Fprintln(os.Stderr, "churn child: job:", err)
		return 2
	}
	reg := churnEngines()
	var rows []ChurnRow
	for _, t := range job.Targets {
		eng, err := reg.Get(t.Spec.Engine)
		if err != nil {
			fmt.Fprintln(os.Stderr, "churn child:", err)
			return 2
		}
		req := backends.Request{ID: t.Checkpoint, Input: t.Input, Data: t.Data}
		row, err := Churn(context.Background(), t.Checkpoint, eng, t.Spec, req, job.Early, job.Cycles)
		if err != nil {
			fmt.Fprintln(os.Stderr, "churn child:", err)
			return 3
		}
		rows = append(rows, row)
	}
	if err := json.NewEncoder(os.Stdout).Encode(rows); err != nil {
		return 4
	}
	return 0
}

// ChurnInChild runs job in a child process (this executable re-executed)
// and returns its rows: the resident set is the churn's own, not the
// caller's (a conformance runner's, with its other cases).
func ChurnInChild(ctx context.Context, job ChurnJob) ([]ChurnRow, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("engines: the churn child needs this executable: %w", err)
	}
	in, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, churnChild.Timeout)
	defer cancel()
	// The child runs niced (every thread of it, as nice starts it): its
	// figures do not depend on time, and the conformance cases beside it
	// wait on the clock.
	cmd := exec.CommandContext(cctx, exe)
	if nice, err := exec.LookPath("nice"); err == nil {
		cmd = exec.CommandContext(cctx, nice, "-n", "15", exe)
	}
	cmd.Env = append(os.Environ(), churnChild.Env+"=1")
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	stderr := &childload.HeadTail{Max: 1024}
	cmd.Stdout, cmd.Stderr = &out, stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("engines: churn in a child: %w: %s", err, stderr)
	}
	var rows []ChurnRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		return nil, fmt.Errorf("engines: churn: the child's answer: %w", err)
	}
	if len(rows) != len(job.Targets) {
		return rows, fmt.Errorf("engines: churn: the child answered %d rows for %d targets", len(rows), len(job.Targets))
	}
	return rows, nil
}

// CheckChurn fails unless every row's ratio is at most MaxChurnRatio.
func CheckChurn(rows []ChurnRow) error {
	var errs []error
	for _, r := range rows {
		if r.EarlyMB <= 0 || r.LastMB <= 0 {
			errs = append(errs, fmt.Errorf("%s: no resident set measured", r.Checkpoint))
		} else if r.Ratio() > MaxChurnRatio {
			errs = append(errs, fmt.Errorf("%s: grew more than %.2fx", r, MaxChurnRatio))
		}
	}
	return errors.Join(errs...)
}

// ShortChurn (the conformance case engine.native-memory) churns every
// checkpoint of cat in turn, in one child process, ShortChurnCycles cycles
// each with its task's first standard request, and checks the ratios.
func ShortChurn(ctx context.Context, cat *catalogue.Catalogue, in map[string][]backends.Request) ([]ChurnRow, error) {
	job := ChurnJob{Early: ShortChurnEarly, Cycles: ShortChurnCycles}
	for _, name := range cat.Names() {
		cp, _ := cat.Get(name)
		req := in[cp.Task][0]
		job.Targets = append(job.Targets, ChurnTarget{Checkpoint: name, Spec: SpecFor(name, cp, 1), Input: req.Input, Data: req.Data})
	}
	rows, err := ChurnInChild(ctx, job)
	if err != nil {
		return rows, err
	}
	return rows, CheckChurn(rows)
}
