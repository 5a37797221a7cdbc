package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// setup is one configuration of the real server: every model's slots and
// --max-loaded-models (0: unlimited).
type setup struct {
	Name             string
	Slots            int
	MaxLoaded        int
	AdmissionTimeout time.Duration // --admission-timeout (0: unbounded)
}

func (s setup) String() string {
	return fmt.Sprintf("slots %d, --max-loaded-models %d, --admission-timeout %v", s.Slots, s.MaxLoaded, s.AdmissionTimeout)
}

// configYAML is the --config file of s: the workload's fixture models.
// JSON is YAML, so the specs are written as JSON objects.
func configYAML(s setup) ([]byte, error) {
	var b strings.Builder
	b.WriteString("models:\n")
	for _, m := range models {
		spec := m.spec(s.Slots)
		spec["id"] = m.ID
		j, err := json.Marshal(spec)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		b.WriteString("  - ")
		b.Write(j)
		b.WriteString("\n")
	}
	return []byte(b.String()), nil
}

// modelsRoot is the server's --models-root (-models-root).
var modelsRoot = "models"

// server is a running `sluice serve` process.
type server struct {
	cmd  *exec.Cmd
	base string
	done chan error
	want int // models ready once the start's loads are done
}

// startServer starts binary as `sluice serve` on a free loopback port with
// the fixture models of s, tracing to trace, and returns once every model
// is ready (bounded by 30 s).
func startServer(binary, dir string, s setup, trace string) (*server, error) {
	cfg, err := configYAML(s)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, s.Name+".yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"serve", "--listen", addr, "--parallel-jobs", "--ui-management", "--fixture",
		"--config", cfgPath, "--models-root", modelsRoot, "--trace", trace, "--log-level", "warn",
		"--max-loaded-models", strconv.Itoa(s.MaxLoaded), "--admission-timeout", s.AdmissionTimeout.String()}
	log, err := os.Create(filepath.Join(dir, s.Name+".log"))
	if err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	srv := &server{cmd: cmd, base: "http://" + addr, done: make(chan error, 1), want: len(models)}
	if s.MaxLoaded > 0 {
		srv.want = min(s.MaxLoaded, len(models))
	}
	go func() { srv.done <- cmd.Wait(); log.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.waitReady(ctx); err != nil {
		srv.stop()
		return nil, fmt.Errorf("%s %s: %w (log: %s)", binary, strings.Join(args, " "), err, log.Name())
	}
	return srv, nil
}

// waitReady polls GET /v1/models until every workload model is ready
// (under --max-loaded-models N: N of them).
func (s *server) waitReady(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.allReady(ctx) {
			return nil
		}
		select {
		case err := <-s.done:
			return fmt.Errorf("server exited: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("models not ready: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

func (s *server) allReady(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/v1/models", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&list) != nil {
		return false
	}
	ready := 0
	for _, m := range list.Data {
		if m.State == "ready" {
			ready++
		}
	}
	return ready >= s.want
}

// stop sends SIGTERM and waits for the exit (SIGKILL after 30 s), so the
// trace is complete and closed.
func (s *server) stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			return fmt.Errorf("server exit: %w", err)
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return errors.New("server did not exit within 30 s of SIGTERM; killed")
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
