package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/internal/listenlog"
)

// The crash loop (CONTRACT.md persist.crash-loop): a real `sluice serve`
// process with --state-dir under management traffic is killed with SIGKILL
// at random instants and restarted on the same flags; after each restart
// every change answered 200 must be there (as acknowledged, or as a change
// in flight at the kill left it), config_version never goes backwards and
// the state always loads.
//
//	SLUICE_CRASHLOOP_KILLS  kills (default 20: the short loop of make test; make crash-loop: 200)
//	SLUICE_CRASHLOOP_SEED   the seed of the traffic and the kill instants (default: from the clock; printed)
//	SLUICE_BIN              the sluice binary to run (default: this test binary, re-executed as `sluice`)

const crashServeEnv = "SLUICE_CRASHLOOP_AS_SLUICE"

// crashServeMain runs the test binary as `sluice` when the crash loop
// re-executes it; it never returns then.
func crashServeMain() {
	if os.Getenv(crashServeEnv) == "1" {
		os.Exit(mainCode(os.Args[1:], os.Stdout, os.Stderr))
	}
}

// crashLoopWorkers each own disjoint models, so the order of one model's
// acknowledged changes is the order its worker sent them in.
const (
	crashLoopWorkers  = 3
	crashLoopPerModel = 3 // models per worker
	crashMaxSlots     = 4
)

// mstate is what a model should be after a restart.
type mstate struct {
	exists  bool
	version uint64
	slots   int
	loaded  bool
}

// pending is a change sent and not answered when the kill came: after the
// restart the model is as before it or as after it.
type pending struct {
	put    bool // a PUT (register or reconfigure) to slots
	slots  int
	loaded bool // the desired state it asks for
}

type crashModel struct {
	acked mstate
	inFly *pending
}

type crashLoop struct {
	t      *testing.T
	bin    string
	env    []string
	dir    string
	roots  [2]string
	client *http.Client

	mu     sync.Mutex
	models map[string]*crashModel
	root   string  // acknowledged models root ("": the flag's)
	rootIn *string // a root change in flight

	acks, lost, kills int
	inFlight, applied int // changes in flight at a kill, and those found applied after it
}

func TestCrashLoop(t *testing.T) {
	kills := 20
	if s := os.Getenv("SLUICE_CRASHLOOP_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100000 {
			t.Fatalf("SLUICE_CRASHLOOP_KILLS=%q", s)
		}
		kills = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_CRASHLOOP_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_CRASHLOOP_SEED=%q", s)
		}
		seed = n
	}
	t.Logf("crash loop: seed %d (SLUICE_CRASHLOOP_SEED=%d reproduces the traffic and kill instants), %d kills", seed, seed, kills)
	fmt.Fprintf(os.Stderr, "crash loop: seed %d, %d kills\n", seed, kills)

	cl := &crashLoop{t: t, dir: filepath.Join(t.TempDir(), "state"), models: map[string]*crashModel{},
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}}
	defer cl.client.CloseIdleConnections()
	cl.bin = os.Getenv("SLUICE_BIN")
	if cl.bin == "" {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cl.bin, cl.env = exe, []string{crashServeEnv + "=1"}
	}
	for k := range cl.roots {
		cl.roots[k] = t.TempDir()
		writeFixtureCheckpoint(t, cl.roots[k], fmt.Sprintf("voice-%d", k))
	}
	for w := range crashLoopWorkers {
		for k := range crashLoopPerModel {
			cl.models[fmt.Sprintf("w%d-m%d", w, k)] = &crashModel{}
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	start := time.Now()
	for i := range kills + 1 {
		p := cl.start()
		cl.check(p, i)
		if i == kills {
			p.stop(t)
			break
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range crashLoopWorkers {
			wr := rand.New(rand.NewPCG(seed, uint64(i*crashLoopWorkers+w+1)))
			wg.Go(func() { cl.traffic(ctx, p.url, w, wr) })
		}
		// The kill instant: a seeded delay into the traffic. This is the
		// fault being injected, not a wait for an ordering.
		timer := time.NewTimer(time.Duration(rng.IntN(120_000)) * time.Microsecond)
		<-timer.C
		p.kill(t)
		cl.kills++
		cancel()
		wg.Wait()
	}
	t.Logf("crash loop: %d kills, %d acknowledged changes, %d lost, %d in flight at a kill (%d of them found applied), %s",
		cl.kills, cl.acks, cl.lost, cl.inFlight, cl.applied, time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(os.Stderr, "crash loop: seed %d: %d kills, %d acknowledged changes, %d changes lost (%d in flight at a kill, %d of them applied)\n",
		seed, cl.kills, cl.acks, cl.lost, cl.inFlight, cl.applied)
	if cl.lost != 0 {
		t.Fatalf("%d acknowledged changes lost", cl.lost)
	}
	if cl.acks < kills {
		t.Fatalf("only %d acknowledged changes over %d kills: the traffic did not run", cl.acks, kills)
	}
}

func writeFixtureCheckpoint(t *testing.T, root, name string) {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := catalogue.Manifest{Schema: catalogue.Schema, Name: name, Task: "tts", Engine: "fixture",
		Files: []catalogue.File{}, Options: json.RawMessage(`{}`), Parallel: catalogue.Parallel{MaxSlots: crashMaxSlots}}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, catalogue.ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// proc is one running server.
type proc struct {
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
	exited chan error
}

// start runs the server on the state dir and waits for its "listening"
// line, which it logs once the restored models are loaded. A server that
// exits first (a state that does not load) fails the test.
func (cl *crashLoop) start() *proc {
	t := cl.t
	t.Helper()
	empty := filepath.Join(filepath.Dir(cl.dir), "models.yaml")
	if err := os.WriteFile(empty, []byte("models: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cl.bin, "serve", "--listen", "127.0.0.1:0", "--parallel-jobs", "--ui-management", "--fixture",
		"--state-dir", cl.dir, "--models-root", cl.roots[0], "--config", empty, "--shutdown-timeout", "2s")
	cmd.Env = append(os.Environ(), cl.env...)
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	addr, copied := listenlog.Scan(out, func(line string) { fmt.Fprintln(p.stderr, line) })
	go func() { <-copied; p.exited <- cmd.Wait() }()
	limit := time.NewTimer(waitLimit)
	defer limit.Stop()
	select {
	case a := <-addr:
		p.url = "http://" + a
	case err := <-p.exited:
		t.Fatalf("the server did not start on its state dir (%v):\n%s", err, p.stderr)
	case <-limit.C:
		_ = cmd.Process.Kill()
		<-p.exited
		t.Fatalf("the server did not start within %s:\n%s", waitLimit, p.stderr)
	}
	return p
}

func (p *proc) kill(t *testing.T) {
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
}

// stop ends the last server with SIGTERM: a clean exit.
func (p *proc) stop(t *testing.T) {
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := <-p.exited; err != nil {
		t.Errorf("clean exit: %v\n%s", err, p.stderr)
	}
}

type crashModelJSON struct {
	ID            string `json:"id"`
	Loaded        bool   `json:"loaded"`
	Slots         int    `json:"slots"`
	ConfigVersion uint64 `json:"config_version"`
}

// check compares the restarted server with every acknowledged change and
// resolves the changes in flight at the kill.
func (cl *crashLoop) check(p *proc, round int) {
	t := cl.t
	t.Helper()
	var list struct {
		Data []crashModelJSON `json:"data"`
	}
	if err := cl.getJSON(p.url+"/v1/models", &list); err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	seen := map[string]crashModelJSON{}
	for _, m := range list.Data {
		seen[m.ID] = m
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for id, m := range cl.models {
		o, ok := seen[id]
		got := mstate{exists: ok, version: o.ConfigVersion, slots: o.Slots, loaded: o.Loaded}
		if !got.exists {
			got = mstate{}
		}
		want := []mstate{m.acked}
		if f := m.inFly; f != nil {
			want = append(want, m.acked.after(f))
		}
		if m.inFly != nil {
			cl.inFlight++
			if got != m.acked && got == want[1] {
				cl.applied++
			}
		}
		if !slices.Contains(want, got) {
			cl.lost++
			t.Errorf("round %d: %s is %+v after the restart; acknowledged %+v, in flight %+v", round, id, got, m.acked, m.inFly)
		}
		if got.exists && got.version < m.acked.version {
			t.Errorf("round %d: %s config_version went back from %d to %d", round, id, m.acked.version, got.version)
		}
		m.acked, m.inFly = got, nil
	}
	var cat struct {
		ModelsRoot string `json:"models_root"`
	}
	if err := cl.getJSON(p.url+"/v1/catalogue", &cat); err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	wantRoots := []string{cl.real(cl.root)}
	if cl.rootIn != nil {
		wantRoots = append(wantRoots, cl.real(*cl.rootIn))
	}
	if !slices.Contains(wantRoots, cl.real(cat.ModelsRoot)) {
		cl.lost++
		t.Errorf("round %d: models root %s after the restart, want one of %v", round, cat.ModelsRoot, wantRoots)
	}
	cl.root, cl.rootIn = cat.ModelsRoot, nil
}

func (cl *crashLoop) real(p string) string {
	if p == "" {
		p = cl.roots[0]
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// after is the state a pending change leaves.
func (s mstate) after(f *pending) mstate {
	if f.put {
		v := s.version
		if !s.exists {
			v = 1
		} else if s.slots != f.slots {
			v++
		}
		return mstate{exists: true, version: v, slots: f.slots, loaded: true}
	}
	if !s.exists {
		return s
	}
	s.loaded = f.loaded
	return s
}

func (cl *crashLoop) getJSON(url string, v any) error {
	res, err := cl.client.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return err
	}
	if res.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d %s", url, res.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

// traffic sends worker w's management changes, one at a time, until the
// server dies or ctx ends. Every change is marked in flight before it is
// sent and acknowledged only on a 200.
func (cl *crashLoop) traffic(ctx context.Context, url string, w int, rng *rand.Rand) {
	ids := make([]string, crashLoopPerModel)
	for k := range ids {
		ids[k] = fmt.Sprintf("w%d-m%d", w, k)
	}
	for ctx.Err() == nil {
		id := ids[rng.IntN(len(ids))]
		cl.mu.Lock()
		m := cl.models[id]
		exists := m.acked.exists
		cl.mu.Unlock()
		var ok bool
		switch op := rng.IntN(10); {
		case !exists || op < 4:
			slots := 1 + rng.IntN(crashMaxSlots)
			ok = cl.change(ctx, url, "PUT", "/v1/models/"+id, fmt.Sprintf(`{"engine":"fixture","slots":%d}`, slots),
				[]string{id}, pending{put: true, slots: slots})
		case op < 6:
			ok = cl.change(ctx, url, "POST", "/v1/models/"+id+"/unload", "", []string{id}, pending{loaded: false})
		case op < 8:
			ok = cl.change(ctx, url, "POST", "/v1/models/"+id+"/load", "", []string{id}, pending{loaded: true})
		case op < 9:
			members := slices.Clone(ids[:1+rng.IntN(len(ids))])
			body, _ := json.Marshal(map[string][]string{"models": append(members, fmt.Sprintf("w%d-absent", w))})
			ok = cl.change(ctx, url, "POST", "/v1/models/unload", string(body), members, pending{loaded: false})
		default:
			if w != 0 { // one worker owns the models root
				continue
			}
			ok = cl.setRoot(ctx, url, cl.roots[rng.IntN(len(cl.roots))])
		}
		if !ok {
			return
		}
	}
}

// change sends one model change; on 200 every model of ids takes its
// effect, which the answer confirms for a PUT.
func (cl *crashLoop) change(ctx context.Context, url, method, path, body string, ids []string, f pending) bool {
	cl.mu.Lock()
	var targets []*crashModel
	for _, id := range ids {
		m := cl.models[id]
		if !f.put && !m.acked.exists {
			continue // an unknown member: not_found changes nothing
		}
		fc := f
		m.inFly = &fc
		targets = append(targets, m)
	}
	cl.mu.Unlock()
	b, status, err := cl.send(ctx, url, method, path, body)
	if err != nil {
		return false // killed: the change stays in flight for the check
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if status != 200 {
		cl.t.Errorf("%s %s %s: %d %s", method, path, body, status, b)
		return false
	}
	for _, m := range targets {
		next := m.acked.after(m.inFly)
		if f.put {
			var got crashModelJSON
			if err := json.Unmarshal(b, &got); err != nil || got.ConfigVersion != next.version || got.Slots != next.slots {
				cl.t.Errorf("%s %s: answered %s, expected %+v", method, path, b, next)
			}
		}
		m.acked, m.inFly = next, nil
		cl.acks++
	}
	return true
}

func (cl *crashLoop) setRoot(ctx context.Context, url, root string) bool {
	cl.mu.Lock()
	cl.rootIn = &root
	cl.mu.Unlock()
	b, status, err := cl.send(ctx, url, "PUT", "/v1/settings/models-root", fmt.Sprintf(`{"models_root":%q}`, root))
	if err != nil {
		return false
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if status != 200 {
		cl.t.Errorf("models root %s: %d %s", root, status, b)
		return false
	}
	cl.root, cl.rootIn = root, nil
	cl.acks++
	return true
}

func (cl *crashLoop) send(ctx context.Context, url, method, path, body string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, method, url+path, strings.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json") // CONTRACT.md err.content-type
	}
	res, err := cl.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, 0, err // the answer was cut by the kill: not acknowledged
	}
	return b, res.StatusCode, nil
}
