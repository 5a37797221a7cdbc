package conformance

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `sluice conformance --target` against the shared server: a table per
// matrix, exit 0, and the JSON report.
func TestMainAgainstTarget(t *testing.T) {
	var out, errb bytes.Buffer
	js := filepath.Join(t.TempDir(), "report.json")
	code := Main([]string{"--target", sharedURL, "--run", `^ops\.ready\.|^two\.a-full`, "--json", js, "--lin", "2"}, &out, &errb, testBuild)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"Operations crossed with model states (ops)", "ops.ready.infer", "pass", "Two-model situations (two)",
		"Linearizability over HTTP: 2 histories, 0 not linearizable"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) == 0 || rep.Lin == nil || rep.Lin.Histories != 2 {
		t.Fatalf("json report: %+v", rep)
	}
}

func TestMainUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"--bogus"}, &out, &errb, testBuild); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if code := Main([]string{"--list", "--run", "^reg"}, &out, &errb, testBuild); code != 0 || !strings.Contains(out.String(), "reg.same-id") {
		t.Fatalf("--list: exit %d\n%s", code, out.String())
	}
}

// --target takes host:port as http://host:port (it used to be passed on
// as is, and every case failed with Go's raw URL error); another scheme
// is a one-line usage error, exit 2.
func TestMainTargetHostPort(t *testing.T) {
	hostPort, ok := strings.CutPrefix(sharedURL, "http://")
	if !ok {
		t.Fatalf("shared server %q is not http://", sharedURL)
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"--target", hostPort, "--run", `^ops\.ready\.infer$`, "--lin", "0"}, &out, &errb, testBuild); code != 0 ||
		!strings.Contains(out.String(), "against "+sharedURL) {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	errb.Reset()
	if code := Main([]string{"--target", "ftp://127.0.0.1:1", "--lin", "0"}, &out, &errb, testBuild); code != 2 || strings.Count(errb.String(), "\n") != 1 ||
		!strings.Contains(errb.String(), "scheme must be http or https") {
		t.Fatalf("ftp: exit %d: %q", code, errb.String())
	}
}

// Against --target, a case that acts on its server's state dir runs only
// with the build as a binary: without --binary it is skipped (a server
// started in process would be the runner's build, not the target's).
func TestFileCasesSkippedAgainstTarget(t *testing.T) {
	n := 0
	for _, c := range loadSuite(t).Cases {
		if !c.TouchesFiles() {
			continue
		}
		n++
		r := RunCase(c, Options{Target: sharedURL, Launcher: InProcess{Build: testBuild}}, sharedURL, NewRunTag())
		if r.Verdict != Skip {
			t.Errorf("%s against --target without --binary: %s %s, want skip", c.Name, r.Verdict, r.Error)
		}
	}
	if n < 7 {
		t.Errorf("%d cases act on their state dir, want the persist cases' 7 at least", n)
	}
}
