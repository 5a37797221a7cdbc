package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/fixture"
)

// The crash_loop step (CONTRACT.md persist.crash-loop): concurrent
// management traffic on the case's binary server, killed with SIGKILL at
// seeded points and started again on its state dir, each start checked
// against every change answered 200. cmd/sluice's TestCrashLoop is the
// long form (make crash-loop); this one is bounded for the suite.

// CrashLoopStep runs Kills rounds: Workers goroutines each send changes to
// Models models of their own (PUT with 1..4 slots, load, unload, a bulk
// unload of some of its models and an unknown ID; worker 0 also moves the
// models root between two folders), one at a time; after a seeded number
// of changes answered 200 (N to 3N-1 for N = Workers*Models, so that most
// models changed since the last start; Seed picks them) the server is
// killed, mid-traffic, and started again. After every start each model
// must be as its last acknowledged change left it, or as the change in
// flight at the kill would, with a config_version never below the last
// acknowledged one, and the models root likewise.
type CrashLoopStep struct {
	Kills   int    `yaml:"kills"`
	Seed    uint64 `yaml:"seed"`
	Workers int    `yaml:"workers"`
	Models  int    `yaml:"models"`
}

func (a *CrashLoopStep) validate(line int) error {
	if a.Kills < 1 || a.Kills > 50 || a.Workers < 1 || a.Workers > 8 || a.Models < 1 || a.Models > 8 {
		return fmt.Errorf("line %d: crash_loop needs kills 1..50, workers 1..8 and models 1..8", line)
	}
	return nil
}

// crashState is what one model is, or should be, after a start.
type crashState struct {
	exists  bool
	version uint64
	slots   int
	loaded  bool
}

// crashChange is a change sent and not answered at the kill.
type crashChange struct {
	put    bool
	slots  int
	loaded bool
}

// after is the state a change leaves.
func (s crashState) after(c crashChange) crashState {
	if c.put {
		v := s.version + 1
		if !s.exists {
			v = 1
		} else if s.slots == c.slots {
			v = s.version
		}
		return crashState{exists: true, version: v, slots: c.slots, loaded: true}
	}
	if s.exists {
		s.loaded = c.loaded
	}
	return s
}

type crashModel struct {
	acked crashState
	inFly *crashChange
}

// crashRun is one crash_loop step's bookkeeping.
type crashRun struct {
	r      *caseRun
	roots  [2]string
	mu     sync.Mutex
	models map[string]*crashModel
	ids    [][]string // per worker
	root   string     // acknowledged models root ("": the flag's)
	rootIn *string    // a root change in flight
	acks   chan struct{}
	errs   []error
}

func (r *caseRun) crashLoop(a *CrashLoopStep) error {
	cr := &crashRun{r: r, models: map[string]*crashModel{}, acks: make(chan struct{}, 1024)}
	for k := range cr.roots {
		cr.roots[k] = filepath.Join(r.caseDir, fmt.Sprintf("crash-root-%d", k))
		if err := crashCheckpoint(cr.roots[k], fmt.Sprintf("voice-%d", k)); err != nil {
			return err
		}
	}
	cr.ids = make([][]string, a.Workers)
	for w := range a.Workers {
		for k := range a.Models {
			id := r.model(fmt.Sprintf("CL%dM%d", w, k))
			cr.ids[w] = append(cr.ids[w], id)
			cr.models[id] = &crashModel{}
		}
	}
	rng := rand.New(rand.NewPCG(a.Seed, 0x5eed))
	for round := range a.Kills {
		ctx, cancel := context.WithCancel(r.ctx)
		var wg sync.WaitGroup
		for w := range a.Workers {
			wr := rand.New(rand.NewPCG(a.Seed, uint64(round*a.Workers+w+1)))
			wg.Go(func() { cr.traffic(ctx, r.base, w, wr) })
		}
		// The kill point: after a seeded number of acknowledged changes,
		// while the other workers' changes are on their way.
		n := a.Workers * a.Models
		want := n + rng.IntN(2*n)
		err := r.waitAcks(cr.acks, want)
		kerr := r.stopServer(&StopStep{Kill: true})
		cancel()
		wg.Wait()
		if err = errors.Join(err, kerr); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		if err := r.startServer(&StartStep{}); err != nil {
			return fmt.Errorf("round %d: the state did not load: %w", round, err)
		}
		if err := cr.check(round); err != nil {
			return err
		}
	}
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return errors.Join(cr.errs...)
}

// waitAcks waits for n acknowledgements, bounded by the step timeout.
func (r *caseRun) waitAcks(acks <-chan struct{}, n int) error {
	ctx, cancel := r.bounded()
	defer cancel()
	for range n {
		select {
		case <-acks:
		case <-ctx.Done():
			return fmt.Errorf("fewer than %d changes answered 200 within %s", n, r.stepTimeout)
		}
	}
	return nil
}

func crashCheckpoint(root, name string) error {
	m := catalogue.Manifest{Schema: catalogue.Schema, Name: name, Task: "tts", Engine: fixture.Name,
		Parallel: catalogue.Parallel{MaxSlots: 4}}
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, name), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, name, catalogue.ManifestName), b, 0o644)
}

// check compares the started server with every acknowledged change and
// resolves the changes in flight at the kill.
func (cr *crashRun) check(round int) error {
	r := cr.r
	ans := r.do(request{method: "GET", path: "/v1/models"})
	if err := r.check(&ans, nil); err != nil {
		return err
	}
	var list struct {
		Data []struct {
			ID            string `json:"id"`
			Loaded        bool   `json:"loaded"`
			Slots         int    `json:"slots"`
			ConfigVersion uint64 `json:"config_version"`
		} `json:"data"`
	}
	if err := json.Unmarshal(ans.body, &list); err != nil {
		return fmt.Errorf("model list: %w", err)
	}
	seen := map[string]crashState{}
	for _, m := range list.Data {
		seen[m.ID] = crashState{exists: true, version: m.ConfigVersion, slots: m.Slots, loaded: m.Loaded}
	}
	cr.mu.Lock()
	defer cr.mu.Unlock()
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(cr.models)) {
		m := cr.models[id]
		got := seen[id]
		want := []crashState{m.acked}
		if m.inFly != nil {
			want = append(want, m.acked.after(*m.inFly))
		}
		if !slices.Contains(want, got) {
			errs = append(errs, fmt.Errorf("round %d: %s is %+v after the restart; acknowledged %+v, in flight %+v", round, id, got, m.acked, m.inFly))
		}
		if got.exists && got.version < m.acked.version {
			errs = append(errs, fmt.Errorf("round %d: %s config_version went back from %d to %d", round, id, m.acked.version, got.version))
		}
		m.acked, m.inFly = got, nil
	}
	ans = r.do(request{method: "GET", path: "/v1/catalogue"})
	if err := r.check(&ans, nil); err != nil {
		return errors.Join(append(errs, err)...)
	}
	var cat struct {
		ModelsRoot string `json:"models_root"`
	}
	if err := json.Unmarshal(ans.body, &cat); err != nil {
		return errors.Join(append(errs, err)...)
	}
	got, want := cr.crashRoot(cat.ModelsRoot), []string{cr.crashRoot(cr.root)}
	if cr.rootIn != nil {
		want = append(want, cr.crashRoot(*cr.rootIn))
	}
	if !slices.Contains(want, got) {
		errs = append(errs, fmt.Errorf("round %d: models root %s after the restart, want one of %v", round, cat.ModelsRoot, want))
	}
	cr.root, cr.rootIn = got, nil
	return errors.Join(errs...)
}

// crashRoot is p when it is one of the step's two models roots, else ""
// (the server's --models-root flag, which differs from start to start).
func (cr *crashRun) crashRoot(p string) string {
	real := func(p string) string {
		if q, err := filepath.EvalSymlinks(p); err == nil {
			return q
		}
		return p
	}
	for _, root := range cr.roots {
		if p != "" && real(p) == real(root) {
			return root
		}
	}
	return ""
}

// traffic sends worker w's changes, one at a time, until ctx ends or the
// server dies. A change is marked in flight before it is sent and
// acknowledged only on a 200.
func (cr *crashRun) traffic(ctx context.Context, base string, w int, rng *rand.Rand) {
	ids := cr.ids[w]
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for ctx.Err() == nil {
		id := ids[rng.IntN(len(ids))]
		cr.mu.Lock()
		exists := cr.models[id].acked.exists
		cr.mu.Unlock()
		var ok bool
		switch op := rng.IntN(10); {
		case !exists || op < 4:
			slots := 1 + rng.IntN(4)
			ok = cr.change(ctx, client, base, "PUT", "/v1/models/"+id, fmt.Sprintf(`{"engine":"fixture","slots":%d}`, slots),
				[]string{id}, crashChange{put: true, slots: slots})
		case op < 6:
			ok = cr.change(ctx, client, base, "POST", "/v1/models/"+id+"/unload", "", []string{id}, crashChange{})
		case op < 8:
			ok = cr.change(ctx, client, base, "POST", "/v1/models/"+id+"/load", "", []string{id}, crashChange{loaded: true})
		case op < 9:
			members := slices.Clone(ids[:1+rng.IntN(len(ids))])
			body, _ := json.Marshal(map[string][]string{"models": append(slices.Clone(members), cr.r.model(fmt.Sprintf("CL%dX", w)))})
			ok = cr.change(ctx, client, base, "POST", "/v1/models/unload", string(body), members, crashChange{})
		default:
			if w != 0 { // one worker owns the models root
				continue
			}
			ok = cr.setRoot(ctx, client, base, cr.roots[rng.IntN(len(cr.roots))])
		}
		if !ok {
			return
		}
	}
}

// ack counts one change answered 200 for the kill point.
func (cr *crashRun) ack() {
	select {
	case cr.acks <- struct{}{}:
	default:
	}
}

// change sends one model change; on 200 each model of ids takes its
// effect, which a PUT's answer confirms.
func (cr *crashRun) change(ctx context.Context, client *http.Client, base, method, path, body string, ids []string, c crashChange) bool {
	cr.mu.Lock()
	var targets []*crashModel
	for _, id := range ids {
		m := cr.models[id]
		if !c.put && !m.acked.exists {
			continue // an unknown member: not_found changes nothing
		}
		f := c
		m.inFly = &f
		targets = append(targets, m)
	}
	cr.mu.Unlock()
	b, status, err := crashSend(ctx, client, base, method, path, body)
	if err != nil {
		return false // killed: the change stays in flight for the check
	}
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if status != 200 {
		cr.errs = append(cr.errs, fmt.Errorf("%s %s %s: %d %s", method, path, body, status, b))
		return false
	}
	for _, m := range targets {
		next := m.acked.after(*m.inFly)
		if c.put {
			var got struct {
				Slots         int    `json:"slots"`
				ConfigVersion uint64 `json:"config_version"`
			}
			if err := json.Unmarshal(b, &got); err != nil || got.ConfigVersion != next.version || got.Slots != next.slots {
				cr.errs = append(cr.errs, fmt.Errorf("%s %s: answered %s, expected %+v", method, path, b, next))
			}
		}
		m.acked, m.inFly = next, nil
	}
	cr.ack()
	return true
}

func (cr *crashRun) setRoot(ctx context.Context, client *http.Client, base, root string) bool {
	cr.mu.Lock()
	cr.rootIn = &root
	cr.mu.Unlock()
	b, status, err := crashSend(ctx, client, base, "PUT", "/v1/settings/models-root", fmt.Sprintf(`{"models_root":%q}`, root))
	if err != nil {
		return false
	}
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if status != 200 {
		cr.errs = append(cr.errs, fmt.Errorf("models root %s: %d %s", root, status, b))
		return false
	}
	cr.root, cr.rootIn = root, nil
	cr.ack()
	return true
}

func crashSend(ctx context.Context, client *http.Client, base, method, path, body string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := client.Do(req)
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
