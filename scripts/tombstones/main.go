// Command tombstones is `make bench-tombstones`: what a client holding the
// management key can do to a real server with register and unregister
// (PUT and DELETE /v1/models/{id}), measured. An unregistered model leaves
// a tombstone (its ID, handle, last config and config version) so that a
// later registration of the ID goes past its last version (CONTRACT.md
// unreg.re-register); tombstones count towards a bound of twice
// --max-models (unreg.tombstone, core/runtime TombstoneFactor).
//
// It starts the built binary (127.0.0.1, --fixture, one startup model)
// and, per phase, reports the server's RSS (/proc/PID/status VmRSS) and
// heap in use (go_memstats_heap_inuse_bytes of GET /metrics; the server
// runs with GOGC=10, so that stays near the live heap):
//
//  1. --max-models N (-max-models, default 1024, the server's default):
//     register and delete new IDs until a PUT is refused: the count, the
//     refusal's status and code, RSS and heap at the cap;
//  2. at the cap: -cycles more register/delete cycles of IDs that have a
//     tombstone (allowed): RSS and heap after them, and whether every
//     re-registration's config_version went past the last;
//  3. --max-models 0 (unlimited): -unbounded register/delete cycles of new
//     IDs: RSS and heap growth per tombstone, the growth the cap bounds.
//
// Phases 1 and 2 run with --state-dir (a DELETE is durable before its
// 200), and the server is then restarted on the state dir: the tombstones
// come back with it.
//
// Size: the defaults (N 1024, 5,000 cycles at the cap, 20,000 unbounded)
// take about 30 s on 2 loaded cores.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	binary := flag.String("binary", "bin/sluice", "the sluice binary")
	maxModels := flag.Int("max-models", 1024, "--max-models of phases 1 and 2")
	cycles := flag.Int("cycles", 5000, "register/delete cycles of tombstoned IDs at the cap")
	unbounded := flag.Int("unbounded", 20000, "register/delete cycles of new IDs under --max-models 0")
	flag.Parse()
	if err := run(*binary, *maxModels, *cycles, *unbounded); err != nil {
		fmt.Fprintln(os.Stderr, "tombstones:", err)
		os.Exit(1)
	}
}

func run(binary string, maxModels, cycles, unbounded int) error {
	dir, err := os.MkdirTemp("", "sluice-tombstones-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	fmt.Printf("bench-tombstones: %s; %s\n\n", time.Now().UTC().Format(time.RFC3339), binary)
	fmt.Printf("%-56s %8s %10s %10s %12s\n", "phase", "entries", "RSS", "heap inuse", "cycles/s")

	state := filepath.Join(dir, "state")
	s, err := start(binary, dir, maxModels, state)
	if err != nil {
		return err
	}
	defer s.stop()
	s.report("start (1 model registered), --state-dir", 1, 0)
	// Phase 1: new IDs until refused.
	n, refused := 0, response{}
	seg := time.Now()
	for {
		id := "t" + strconv.Itoa(n)
		r := s.put(id)
		if r.status != http.StatusOK {
			refused = r
			break
		}
		if r := s.del(id); r.status != http.StatusOK {
			return fmt.Errorf("delete %s: %d %s", id, r.status, r.body)
		}
		n++
		if n%(maxModels/2) == 0 {
			s.report(fmt.Sprintf("after %d register/delete of new IDs", n), n+1, float64(maxModels/2)/time.Since(seg).Seconds())
			seg = time.Now()
		}
		if n > 4*maxModels+8 {
			return fmt.Errorf("no refusal after %d new IDs under --max-models %d: tombstones are not bounded", n, maxModels)
		}
	}
	s.report(fmt.Sprintf("at the cap: %d tombstones", n), n+1, 0)
	fmt.Printf("\nthe PUT of new ID %d: %d %s\n", n+1, refused.status, errorCode(refused.body))
	fmt.Printf("tombstones at the cap: %d (+1 registered model = %d entries = 2 x --max-models %d)\n\n", n, n+1, maxModels)
	// Phase 2: churn on tombstoned IDs at the cap.
	last := map[string]uint64{}
	monotone := true
	seg = time.Now()
	for k := range cycles {
		id := "t" + strconv.Itoa(k%n)
		r := s.put(id)
		if r.status != http.StatusOK {
			return fmt.Errorf("re-register %s at the cap: %d %s", id, r.status, r.body)
		}
		if r.version <= last[id] || r.version < 2 {
			monotone = false
		}
		last[id] = r.version
		if r := s.del(id); r.status != http.StatusOK {
			return fmt.Errorf("delete %s: %d %s", id, r.status, r.body)
		}
	}
	s.report(fmt.Sprintf("+%d register/delete of tombstoned IDs", cycles), n+1, float64(cycles)/time.Since(seg).Seconds())
	maxV := uint64(0)
	for _, v := range last {
		maxV = max(maxV, v)
	}
	fmt.Printf("\nevery re-registration went past the ID's last config_version: %v (highest %d)\n", monotone, maxV)
	if r := s.put("fresh"); r.status == http.StatusOK {
		return errors.New("a new ID registered at the cap after the churn")
	} else {
		fmt.Printf("a new ID after the churn: %d %s\n", r.status, errorCode(r.body))
	}
	fmt.Printf("state dir: %s\n\n", dirSize(state))
	if err := s.stop(); err != nil {
		return err
	}
	// The tombstones come back from the state dir at a restart.
	rs, err := start(binary, dir, maxModels, state)
	if err != nil {
		return err
	}
	rs.report("restarted on the state dir", n+1, 0)
	r := rs.put("fresh")
	fmt.Printf("\na new ID after the restart: %d %s\n\n", r.status, errorCode(r.body))
	if err := rs.stop(); err != nil {
		return err
	}

	// Phase 3: no cap.
	u, err := start(binary, dir, 0, "")
	if err != nil {
		return err
	}
	defer u.stop()
	rss0, heap0 := u.report("--max-models 0, no state dir: start", 1, 0)
	seg = time.Now()
	for k := range unbounded {
		id := "u" + strconv.Itoa(k)
		if r := u.put(id); r.status != http.StatusOK {
			return fmt.Errorf("unbounded: put %s: %d %s", id, r.status, r.body)
		}
		if r := u.del(id); r.status != http.StatusOK {
			return fmt.Errorf("unbounded: delete %s: %d %s", id, r.status, r.body)
		}
	}
	rss1, heap1 := u.report(fmt.Sprintf("--max-models 0: +%d new IDs registered, deleted", unbounded), unbounded+1,
		float64(unbounded)/time.Since(seg).Seconds())
	fmt.Printf("\nper tombstone under --max-models 0: RSS %+.0f bytes, heap in use %+.0f bytes\n",
		float64(rss1-rss0)/float64(unbounded), float64(heap1-heap0)/float64(unbounded))
	return nil
}

type server struct {
	cmd  *exec.Cmd
	base string
	hc   *http.Client
	done chan struct{}
}

// start starts binary with one fixture model and --max-models maxModels
// (and --state-dir state, unless empty), once it serves.
func start(binary, dir string, maxModels int, state string) (*server, error) {
	cfg := filepath.Join(dir, "models.yaml")
	if err := os.WriteFile(cfg, []byte("models:\n  - {id: keep, engine: fixture, task: echo}\n"), 0o644); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(binary, "serve", "--listen", addr, "--parallel-jobs", "--ui-management", "--fixture",
		"--config", cfg, "--log-level", "error", "--max-models", strconv.Itoa(maxModels))
	if state != "" {
		cmd.Args = append(cmd.Args, "--state-dir", state)
	}
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), "GOGC=10") // heap in use near the live heap (heapInuse)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	s := &server{cmd: cmd, base: "http://" + addr, hc: &http.Client{Timeout: 30 * time.Second}, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if r := s.do(http.MethodGet, "/v1/models/keep", ""); r.status == http.StatusOK {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("server not ready in 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) stop() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return nil
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return errors.New("server did not exit within 30 s of SIGTERM")
	}
}

type response struct {
	status  int
	body    string
	version uint64
}

func (s *server) put(id string) response {
	return s.do(http.MethodPut, "/v1/models/"+id, `{"engine":"fixture","task":"echo"}`)
}

func (s *server) del(id string) response { return s.do(http.MethodDelete, "/v1/models/"+id, "") }

func (s *server) do(method, path, body string) response {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, s.base+path, rd)
	if err != nil {
		return response{body: err.Error()}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return response{body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var m struct {
		ConfigVersion uint64 `json:"config_version"`
	}
	_ = json.Unmarshal(b, &m)
	return response{status: resp.StatusCode, body: string(b), version: m.ConfigVersion}
}

// report prints the server's RSS and heap in use and a rate (0: none),
// and returns them.
func (s *server) report(phase string, entries int, rate float64) (rss, heap int64) {
	rss = s.rss()
	heap = s.heapInuse()
	r := "-"
	if rate > 0 {
		r = fmt.Sprintf("%.0f", rate)
	}
	fmt.Printf("%-56s %8d %10s %10s %12s\n", phase, entries, mib(rss), mib(heap), r)
	return rss, heap
}

// errorCode is the code and message of an error answer.
func errorCode(body string) string {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(body), &e) != nil {
		return firstLine(body)
	}
	return e.Error.Code + ": " + e.Error.Message
}

// dirSize is the bytes of the files under dir.
func dirSize(dir string) string {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return fmt.Sprintf("%d bytes", n)
}

func (s *server) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return -1
}

// heapInuse reads go_memstats_heap_inuse_bytes from /metrics (the server
// runs with GOGC=10, so the heap in use stays within about 10% of the
// live heap).
func (s *server) heapInuse() int64 {
	r := s.do(http.MethodGet, "/metrics", "")
	for _, line := range strings.Split(r.body, "\n") {
		if v, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return int64(f)
			}
		}
	}
	return -1
}

func mib(b int64) string {
	if b < 0 {
		return "?"
	}
	return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return string(bytes.TrimSpace([]byte(s)))
}
