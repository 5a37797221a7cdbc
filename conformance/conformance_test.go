package conformance

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The in-process suite: one shared loopback server (parallel runtime,
// management, fixture, invariants checked after every scheduler event) for
// the cases without their own server, in-process servers for the others,
// and a build of cmd/sluice for the cases that need a real process.

var (
	sharedURL  string
	sharedInst Instance
)

// testSlack widens the time bounds cases state (within_ms, max_ms) for the
// race detector on a loaded two-core machine.
const testSlack = 4

func TestMain(m *testing.M) {
	flag.Parse()
	// Cases spend their time waiting for gates and answers, not on CPU: run
	// more of them at once than the default GOMAXPROCS, unless -parallel
	// was given.
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "12")
	}
	inst, err := InProcess{CheckInvariants: true, Build: testBuild}.Start(ServerSpec{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedInst, sharedURL = inst, inst.URL()
	code := m.Run()
	if err := inst.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "shared server:", err)
		if code == 0 {
			code = 1
		}
	}
	binaryCleanup()
	// Every server, call and connection the suite started is gone.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func loadSuite(t testing.TB) *Suite {
	t.Helper()
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformance runs every case as its own subtest,
// TestConformance/<case name>.
func TestConformance(t *testing.T) {
	s := loadSuite(t)
	opts := Options{Launcher: InProcess{CheckInvariants: true, Build: testBuild}, StepTimeout: 20 * time.Second, Slack: testSlack,
		ModelsRoot: DefaultModelsRoot("../models")}
	tag := NewRunTag() // -count=N reuses the shared server: every run needs its own IDs
	var mu sync.Mutex
	ran := map[string]string{}                        // verdicts of the cases that ran, for the run evidence
	t.Cleanup(func() { checkRunEvidence(t, s, ran) }) // after every parallel case
	for _, c := range s.Cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				v := Pass
				if t.Failed() {
					v = Fail
				}
				mu.Lock()
				ran[c.Name] = v
				mu.Unlock()
			}()
			o := opts
			if c.NeedsBinary() {
				b, err := testBinary()
				if err != nil {
					t.Fatalf("build cmd/sluice: %v", err)
				}
				o.Binary = Binary{Path: b}
			}
			r := RunCase(c, o, sharedURL, tag)
			switch r.Verdict {
			case Fail:
				t.Fatalf("%s\ncells: %v %v", r.Error, c.Covers, c.Partial)
			case Skip:
				// Every case runs here: in process, with a built binary and
				// the models root. A real engine or models root missing is
				// a failure (make deps, make models), never a skip.
				t.Fatalf("could not run: %s (make deps and make models install what the real engines need)\ncells: %v %v", r.Error, c.Covers, c.Partial)
			}
		})
	}
}

// EvidenceWriteEnv makes TestConformance record its verdicts as the run
// evidence (EvidenceFile) instead of checking them against it (`make
// contract`).
const EvidenceWriteEnv = "SLUICE_CONFORMANCE_WRITE_EVIDENCE"

// checkRunEvidence compares the verdicts of the cases that ran with the
// committed run evidence, so that CONTRACT.md's labels cannot outlive what
// they stand for (a case that is now skipped or failing); with
// EvidenceWriteEnv a run of every case writes the evidence instead. It runs
// in TestConformance's Cleanup, after the parallel cases, and so reports
// with t.Error, never t.Fatal: a FailNow there makes go test drop the
// output of every failed case, and a CI log without -v then says only FAIL.
func checkRunEvidence(t *testing.T, s *Suite, ran map[string]string) {
	path := "../" + EvidenceFile
	if os.Getenv(EvidenceWriteEnv) != "" {
		if len(ran) != len(s.Cases) {
			t.Errorf("%s: only %d of %d cases ran; the evidence needs a run of every case", EvidenceWriteEnv, len(ran), len(s.Cases))
			return
		}
		if err := (&RunEvidence{Cases: ran}).Write(path); err != nil {
			t.Error(err)
		}
		return
	}
	rec, err := ReadRunEvidence(path)
	if err != nil {
		t.Error(err)
		return
	}
	if err := rec.Drift(ran); err != nil {
		t.Error(err)
	}
}

var (
	binOnce sync.Once
	binPath string
	binDir  string
	binErr  error
)

// testBinary returns a build of cmd/sluice for the cases that need a real
// process: $SLUICE_CONFORMANCE_BINARY when set, else one `go build` per
// test run.
func testBinary() (string, error) {
	binOnce.Do(func() {
		if p := os.Getenv("SLUICE_CONFORMANCE_BINARY"); p != "" {
			binPath = p
			return
		}
		binDir, binErr = os.MkdirTemp("", "sluice-conformance-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "sluice")
		// The binary has the planted bugs when the tests do (buildTags).
		out, err := exec.Command("go", "build", "-tags="+buildTags, "-o", binPath, "github.com/sluice-dev/sluice/cmd/sluice").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("%w: %s", err, out)
		}
	})
	return binPath, binErr
}

func binaryCleanup() {
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}
