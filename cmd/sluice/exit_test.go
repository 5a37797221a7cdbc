package main

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/listenlog"
)

// sluiceBinary builds cmd/sluice: a process is the only way to check an
// exit that must not wait for a goroutine stuck in an engine call (the
// stuck goroutine would outlive an in-process serve).
func sluiceBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluice")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// CONTRACT.md time.shutdown-stuck-native: SIGTERM while an engine call
// ignores its context (the fixture's stuck request, like a native call)
// with --shutdown-timeout 2s. The process exits by the deadline plus the
// exit margin, with status 3, and its log names the stuck request: model,
// slot, request ID and how long it ran. Before the exit bound the process
// never exited: the test's own 30 s context ended first.
func TestServeExitsOverStuckEngineCall(t *testing.T) {
	bin := sluiceBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--parallel-jobs", "--ui-management", "--fixture",
		"--shutdown-timeout", "2s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var logs syncBuffer
	addr, scanned := listenlog.Scan(stderr, func(line string) { _, _ = logs.Write([]byte(line + "\n")) })
	go func() {
		<-scanned
		exited <- cmd.Wait()
	}()
	defer func() { // the process never outlives the test
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()
	var url string
	select {
	case a := <-addr:
		url = "http://" + a
	case err := <-exited:
		t.Fatalf("exited before listening: %v\n%s", err, logs.String())
	case <-ctx.Done():
		t.Fatalf("no listening line\n%s", logs.String())
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	do := func(method, path, body string, hdr ...string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, url+path, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json") // CONTRACT.md err.content-type
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		return c.Do(req)
	}
	res, err := do(http.MethodPut, "/v1/models/stuck-m", `{"engine":"fixture","slots":1}`)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("register: %v %v", res, err)
	}
	res.Body.Close()

	// The admission event says the request holds its slot and runs.
	events, err := do(http.MethodGet, "/v1/events", "")
	if err != nil || events.StatusCode != http.StatusOK {
		t.Fatalf("events: %v %v", events, err)
	}
	go func() {
		res, err := do(http.MethodPost, "/v1/models/stuck-m/infer", `{"input":{"stuck":true,"gate":"never"}}`,
			"X-Request-Id", "stuck-req-1")
		if err == nil {
			res.Body.Close()
		}
	}()
	sc := bufio.NewScanner(events.Body)
	admitted := false
	for !admitted && sc.Scan() {
		line := sc.Text()
		admitted = strings.HasPrefix(line, "data:") && strings.Contains(line, `"type":"admission"`) &&
			strings.Contains(line, `"model":"stuck-m"`)
	}
	events.Body.Close()
	if !admitted {
		t.Fatalf("no admission event: %v\n%s", sc.Err(), logs.String())
	}

	began := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-exited:
	case <-ctx.Done():
		t.Fatalf("still running %s after SIGTERM with --shutdown-timeout 2s\n%s", time.Since(began), logs.String())
	}
	took := time.Since(began)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitStuck {
		t.Fatalf("exit: %v, want status %d\n%s", err, exitStuck, logs.String())
	}
	if took < 2*time.Second {
		t.Fatalf("exited after %s, before the 2s deadline", took)
	}
	l := logs.String()
	for _, want := range []string{"shutdown gave up on work that ignores cancellation", "model=stuck-m", "kind=request",
		"slot=0", "request_id=stuck-req-1", "running=", "exiting with work still running"} {
		if !strings.Contains(l, want) {
			t.Fatalf("log lacks %q:\n%s", want, l)
		}
	}
	t.Logf("exited with status %d after %s", ee.ExitCode(), took.Round(time.Millisecond))
}
