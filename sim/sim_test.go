package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/core"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCampaign is the short campaign of `make test`: 500 seeds of 5,000
// core events, each with its own swarm of features, faults and workload
// (a few seconds on two cores).
func TestCampaign(t *testing.T) {
	seeds := 500
	if testing.Short() {
		seeds = 50
	}
	cr, err := Campaign(CampaignOptions{First: 1, Seeds: seeds, Base: Options{Steps: 5000}})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	cr.Write(&b)
	t.Log(b.String())
	for _, f := range cr.Failures {
		t.Errorf("FAIL %v\n  replay: %s", f, f.Replay(Options{Steps: 5000}))
	}
	if cr.Runs != seeds || cr.Events < int64(seeds)*5000 {
		t.Fatalf("%d runs, %d events", cr.Runs, cr.Events)
	}
	if cr.Admissions == 0 || cr.Rejections["server_busy"] == 0 || cr.Rejections["cancelled"] == 0 ||
		cr.Rejections["shutting_down"] == 0 || cr.Rejections["backend_error"] == 0 {
		t.Fatalf("the campaign misses outcomes: %+v", cr)
	}
}

// TestSameSeedSameTrace: a seed replays exactly, down to the trace bytes;
// another seed differs.
func TestSameSeedSameTrace(t *testing.T) {
	run := func(seed uint64) ([]byte, Summary) {
		var buf bytes.Buffer
		res, err := Run(Options{Seed: seed, Steps: 4000, Trace: &buf, Shutdown: ModeAlways, Faults: FaultsHigh})
		if err != nil || res.Failure != nil {
			t.Fatalf("seed %d: %v %v", seed, err, res.Failure)
		}
		return buf.Bytes(), res.Summary
	}
	for _, seed := range []uint64{3, 11, 42} {
		a, sa := run(seed)
		b, sb := run(seed)
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Fatalf("seed %d: traces of %d and %d bytes differ", seed, len(a), len(b))
		}
		if sa.Events != sb.Events || sa.VirtualTime != sb.VirtualTime || sa.WaitP99 != sb.WaitP99 {
			t.Fatalf("seed %d: summaries differ: %+v %+v", seed, sa, sb)
		}
		c, _ := run(seed + 1000)
		if bytes.Equal(a, c) {
			t.Fatalf("seeds %d and %d give the same trace", seed, seed+1000)
		}
	}
}

// TestTraceReplays reads a trace back through core.Record and replays its
// events on a fresh machine: every effect line comes out identical, so the
// trace is exactly the behaviour the core showed.
func TestTraceReplays(t *testing.T) {
	for _, seed := range []uint64{5, 9} {
		var buf bytes.Buffer
		o := Options{Seed: seed, Steps: 3000, Trace: &buf, Shutdown: ModeAlways}
		res, err := Run(o)
		if err != nil || res.Failure != nil {
			t.Fatalf("seed %d: %v %v", seed, err, res.Failure)
		}
		w, _ := newWorld(&o) // the scenario's core options
		m, err := core.New(w.sc.opts)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(&buf)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var want []string
		var got []string
		events, sawComplete := 0, false
		for sc.Scan() {
			line := sc.Text()
			var r core.Record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			if r.Ef != "" {
				want = append(want, line)
				sawComplete = sawComplete || r.Ef == "ShutdownComplete"
				continue
			}
			ev, err := r.Event()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Step(ev); err != nil {
				t.Fatalf("event %d %s: %v", events, line, err)
			}
			events++
			for _, e := range m.Effects() {
				b, err := core.MarshalRecord(m.EffectRecord(ev.Now, e))
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, strings.TrimSuffix(string(b), "\n"))
			}
			m.Advance()
		}
		if len(got) != len(want) {
			t.Fatalf("seed %d: replay gave %d effects, trace has %d", seed, len(got), len(want))
		}
		for k := range got {
			if got[k] != want[k] {
				t.Fatalf("seed %d: effect %d: replay %s, trace %s", seed, k, got[k], want[k])
			}
		}
		if !sawComplete || events < 2500 {
			t.Fatalf("seed %d: %d events, ShutdownComplete %v", seed, events, sawComplete)
		}
	}
}

// TestMainOK runs the command on a passing seed with a timeline and a trace.
func TestMainOK(t *testing.T) {
	dir := t.TempDir()
	var out, errs bytes.Buffer
	code := Main([]string{"--seed", "7", "--steps", "3000", "--timeline", dir + "/t.svg", "--trace", dir + "/t.ndjson"}, &out, &errs)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errs.String())
	}
	for _, want := range []string{"admission wait p50", "rejections", "util", "sim: ok"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	if fi, err := os.Stat(dir + "/t.ndjson"); err != nil || fi.Size() == 0 {
		t.Fatalf("trace: %v", err)
	}
	if code := Main([]string{"--bogus"}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("bad flag: exit %d", code)
	}
	if code := Main([]string{"--mutant", "nope"}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("bad mutant: exit %d", code)
	}
}

// TestTimelineSVG draws a run and checks the picture is well-formed SVG
// naming every model.
func TestTimelineSVG(t *testing.T) {
	res, err := Run(Options{Seed: 7, Steps: 3000, Timeline: true, Shutdown: ModeAlways})
	if err != nil || res.Failure != nil {
		t.Fatal(err, res.Failure)
	}
	var buf bytes.Buffer
	if err := res.Timeline.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("svg: %v", err)
		}
	}
	for _, m := range res.Timeline.Models {
		if !strings.Contains(buf.String(), ">"+m.ID+"<") {
			t.Fatalf("no lane for %s", m.ID)
		}
	}
	if !strings.Contains(buf.String(), "shutdown") {
		t.Fatal("no shutdown mark")
	}
}

func TestDdmin(t *testing.T) {
	all := make([]int, 500)
	for k := range all {
		all[k] = k
	}
	fails := func(idx []int) bool {
		n := 0
		for _, x := range idx {
			if x == 17 || x == 311 || x == 499 {
				n++
			}
		}
		return n == 3
	}
	got, tests, complete := ddmin(all, fails, 10000, time.Now().Add(time.Minute))
	if len(got) != 3 || got[0] != 17 || got[1] != 311 || got[2] != 499 || !complete {
		t.Fatalf("ddmin = %v after %d tests (complete %v)", got, tests, complete)
	}
}

func TestHistQuantile(t *testing.T) {
	var h hist
	for v := int64(1); v <= 100000; v++ {
		h.add(v * 1000)
	}
	for _, c := range []struct {
		q    float64
		want int64
	}{{0.5, 50_000_000}, {0.99, 99_000_000}} {
		got := h.quantile(c.q)
		if got > c.want || got < c.want*96/100 {
			t.Fatalf("q%.2f = %d, want about %d", c.q, got, c.want)
		}
	}
	if h.max != 100_000_000 || h.n != 100000 {
		t.Fatalf("max %d n %d", h.max, h.n)
	}
	for b := range bucketOf(1<<62) + 1 {
		if lo := bucketLow(b); b > 0 && bucketOf(lo) != b {
			t.Fatalf("bucket %d: low %d maps to %d", b, lo, bucketOf(lo))
		}
	}
}

// TestSoak is `make soak`: SLUICE_SIM_SOAK=<steps> runs one seed that long
// (SLUICE_SIM_SEED picks it) and prints the summary.
func TestSoak(t *testing.T) {
	env := os.Getenv("SLUICE_SIM_SOAK")
	if env == "" {
		t.Skip("set SLUICE_SIM_SOAK=<steps> (make soak uses 10000000)")
	}
	steps, err := strconv.Atoi(env)
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(1)
	if s := os.Getenv("SLUICE_SIM_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	code := Main([]string{"--seed", strconv.FormatUint(seed, 10), "--steps", env, "--minimize", "120s"}, &out, &out)
	t.Log("\n" + out.String())
	if code != 0 {
		t.Fatalf("soak of %d steps failed", steps)
	}
}

// TestWriteTraces writes the traces of a few seeds, each with its options
// file, under $SLUICE_TRACE_DIR/sim for spec's trace validator (make
// trace-check); it is skipped when the variable is unset.
func TestWriteTraces(t *testing.T) {
	dir := os.Getenv("SLUICE_TRACE_DIR")
	if dir == "" {
		t.Skip("SLUICE_TRACE_DIR is not set")
	}
	dir += "/sim"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 8; seed++ {
		path := dir + "/seed" + strconv.FormatUint(seed, 10) + ".ndjson"
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(Options{Seed: seed, Steps: 3000, Shutdown: ModeAlways, Trace: f})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = WriteTraceOptions(path, res.Core)
		}
		if err != nil || res.Failure != nil {
			t.Fatalf("seed %d: %v %v", seed, err, res.Failure)
		}
	}
}
