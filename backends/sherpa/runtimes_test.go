package sherpa_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/internal/native"
	"github.com/sluice-dev/sluice/backends/onnx"
	"github.com/sluice-dev/sluice/backends/sherpa"
)

// Two ONNX Runtimes in one process (docs/design.md "sherpa-onnx beside
// onnxruntime-node"): Silero (backends/onnx) loads onnxruntime-node's
// libonnxruntime.so.1 (1.30.0) RTLD_GLOBAL; sherpa-onnx loads its own
// libonnxruntime.so (1.28.2) as a dependency of libsherpa-onnx-c-api.so,
// RTLD_LOCAL. Different sonames make them two objects, and both export
// only OrtGetApiBase under a version tag (VERS_1.30.0, VERS_1.28.2), so
// sherpa-onnx's versioned reference cannot bind to the other one.
//
// TestTwoRuntimes proves it: child processes (this test binary, running
// TestRuntimesChild) answer the same requests with Silero alone, sherpa
// alone, Silero loaded first and sherpa loaded first, interleaving the
// two engines' requests; every answer must be byte-identical to the
// single-runtime process's, and the mixed processes must map both
// runtime files.
func TestTwoRuntimes(t *testing.T) {
	root := sherpa.TestRoot(t)
	native.SkipUnavailable(t, onnx.Available())
	if err := engines.BuildDefaultRoot(root, "", catalogue.SileroV5); err != nil {
		t.Fatal(err)
	}
	run := func(order string) map[string]string {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestRuntimesChild$", "-test.v")
		cmd.Env = append(os.Environ(), "SLUICE_RUNTIMES_ORDER="+order, "SLUICE_RUNTIMES_ROOT="+root)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", order, err, out)
		}
		got := map[string]string{}
		for _, line := range strings.Split(string(out), "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), "RESULT "); ok && k == "" {
				name, val, _ := strings.Cut(v, "=")
				got[name] = val
			}
		}
		return got
	}
	alone := map[string]string{}
	for k, v := range run("onnx") {
		alone[k] = v
	}
	for k, v := range run("sherpa") {
		alone[k] = v
	}
	for _, k := range []string{"silero", "piper", "ctc", "rss-onnx", "rss-sherpa"} {
		if alone[k] == "" {
			t.Fatalf("single-runtime processes answered %v, no %s", alone, k)
		}
	}
	if alone["maps-onnx"] != "onnxruntime-1.30" || alone["maps-sherpa"] != "onnxruntime-1.28" {
		t.Fatalf("single-runtime processes mapped %q and %q", alone["maps-onnx"], alone["maps-sherpa"])
	}
	for _, order := range []string{"onnx,sherpa", "sherpa,onnx"} {
		got := run(order)
		for _, k := range []string{"silero", "piper", "ctc"} {
			if got[k] != alone[k] {
				t.Errorf("%s: %s answered %s, alone %s", order, k, got[k], alone[k])
			}
		}
		if got["maps"] != "onnxruntime-1.30,onnxruntime-1.28" {
			t.Errorf("%s: mapped runtimes %q, want both", order, got["maps"])
		}
		t.Logf("%s: RSS %s kB (Silero alone %s, sherpa alone %s)", order, got["rss"], alone["rss-onnx"], alone["rss-sherpa"])
	}
}

// TestRuntimesChild is TestTwoRuntimes's child: it loads the engines in
// SLUICE_RUNTIMES_ORDER and prints the hash of every answer.
func TestRuntimesChild(t *testing.T) {
	order, root := os.Getenv("SLUICE_RUNTIMES_ORDER"), os.Getenv("SLUICE_RUNTIMES_ROOT")
	if order == "" {
		t.Skip("the child of TestTwoRuntimes")
	}
	ctx := context.Background()
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatal(err)
	}
	open := func(eng backends.Engine, name string) backends.Session {
		cp, err := catalogue.Load(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		s, _, err := eng.Open(ctx, engines.SpecFor(name, cp, 1))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	type job struct {
		name string
		s    backends.Session
		req  backends.Request
	}
	var jobs []job
	for _, which := range strings.Split(order, ",") {
		switch which {
		case "onnx":
			jobs = append(jobs, job{"silero", open(onnx.New(onnx.Config{}), catalogue.SileroV5), backends.Request{Data: wav}})
		case "sherpa":
			e := sherpa.New(sherpa.Config{NoChild: true})
			jobs = append(jobs, job{"piper", open(e, sherpa.PiperSynthetic), backends.Request{Input: []byte(`{"text":"Two runtimes, one process."}`)}},
				job{"ctc", open(e, sherpa.NemoCTCSynthetic), backends.Request{Data: wav}})
		}
	}
	results := map[string]string{}
	for round := range 3 { // interleaved, three times: the answers must not drift
		for _, j := range jobs {
			out, err := j.s.Infer(ctx, j.req, nil)
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.Sum256(engines.Normalize(out))
			sum := hex.EncodeToString(h[:8])
			if prev, ok := results[j.name]; ok && prev != sum {
				t.Fatalf("%s drifted in round %d", j.name, round)
			}
			results[j.name] = sum
		}
	}
	maps, _ := os.ReadFile("/proc/self/maps")
	var mapped []string
	if strings.Contains(string(maps), "onnxruntime-node") {
		mapped = append(mapped, "onnxruntime-1.30")
	}
	if strings.Contains(string(maps), "sherpa-onnx-linux-x64/libonnxruntime.so") {
		mapped = append(mapped, "onnxruntime-1.28")
	}
	for k, v := range results {
		fmt.Printf("RESULT %s=%s\n", k, v)
	}
	rss := "rss"
	if !strings.Contains(order, ",") {
		rss += "-" + order
		fmt.Printf("RESULT maps-%s=%s\n", order, strings.Join(mapped, ","))
	} else {
		fmt.Printf("RESULT maps=%s\n", strings.Join(mapped, ","))
	}
	fmt.Printf("RESULT %s=%d\n", rss, rssKB())
	b, _ := json.Marshal(results)
	t.Logf("%s", b)
}

// rssKB reads VmRSS from /proc/self/status.
func rssKB() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var n int
			fmt.Sscanf(strings.TrimSpace(v), "%d", &n)
			return n
		}
	}
	return 0
}
