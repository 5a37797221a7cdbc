package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The attacks, one function a figure.

// oneRequest measures (a): a fresh server, one request (capped at 120 s),
// the CPU delta around it and VmHWM after it (with VmRSS before it).
func (h *harness) oneRequest(rq request) string {
	p, err := h.start(nil)
	if err != nil {
		return "error: " + err.Error()
	}
	defer p.kill()
	c0, err := p.cpu()
	if err != nil {
		return "error: " + err.Error()
	}
	rss0, _ := p.status("VmRSS")
	code, serr := send(p.url, rq, 120*time.Second)
	c1, err := p.cpu()
	if err != nil {
		return "error: " + err.Error()
	}
	hwm, _ := p.status("VmHWM")
	return fmt.Sprintf("%.2f s, %.0f MiB (idle %.0f) [%s]", c1-c0, hwm, rss0, statusText(code, serr))
}

// stalledStream measures (b).
func (h *harness) stalledStream() string {
	p, err := h.start(nil)
	if err != nil {
		return "error: " + err.Error()
	}
	defer p.kill()
	// The longest model ID (128 bytes) makes the longest chunks: the model
	// and the session name carry it, about 380 bytes a chunk, 3.7 MB in all.
	model := "stall-" + strings.Repeat("x", 122)
	if code, err := send(p.url, put("/v1/models/"+model, `{"engine":"fixture","task":"tts","slots":1}`), 30*time.Second); code != 200 {
		return fmt.Sprintf("error: register: %d %v", code, err)
	}
	// The stalled client: a 4 KiB receive buffer, a request, no reads.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		return "error: " + err.Error()
	}
	defer conn.Close()
	body := `{"input":{"chunks":10000},"stream":true}`
	fmt.Fprintf(conn, "POST /v1/models/"+model+"/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if err := awaitActive(p.url, model); err != nil {
		return "error: " + err.Error()
	}
	unloaded := make(chan struct{})
	go func() {
		defer close(unloaded)
		_, _ = send(p.url, jsonPost("/v1/models/"+model+"/unload", ``), 70*time.Second)
	}()
	// The unload queues behind the stream's lease; then a request behind it.
	queued := false
	for range 400 {
		if m, err := getJSON(p.url, "/v1/models/"+model); err == nil {
			if n, _ := m["queued_managers"].(float64); n >= 1 {
				queued = true
				break
			}
			if n, _ := m["active_slots"].(float64); n == 0 {
				break // the stream ended: it did not stall
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	if !queued {
		return "error: the stream did not stall (the unload never queued behind it)"
	}
	begin := time.Now()
	code, serr := send(p.url, jsonPost("/v1/models/"+model+"/infer", `{"input":{}}`), 60*time.Second)
	took := time.Since(begin)
	_ = conn.Close()
	<-unloaded
	if errors.Is(serr, context.DeadlineExceeded) {
		return "> 60 s"
	}
	return fmt.Sprintf("%.2f s [%s]", took.Seconds(), statusText(code, serr))
}

// bigUploads measures (c): 20 concurrent 24 MiB WAV uploads at rate (each
// capped at 120 s), then VmHWM. At 16 kHz they hold 786 s of audio, over
// pocketsphinx's max_seconds of 300 (c1: the body's cost alone); at 44.1
// kHz 285 s, decoded and transcribed (c2: the body and the decode).
func (h *harness) bigUploads(rate int) string {
	p, err := h.start(nil)
	if err != nil {
		return "error: " + err.Error()
	}
	defer p.kill()
	rss0, _ := p.status("VmRSS")
	data := wav(rate, 24<<20-512) // the multipart framing stays under 24 MiB + 512 B
	codes := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			code, err := send(p.url, transcription("asr", data), 120*time.Second)
			mu.Lock()
			codes[statusText(code, err)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	hwm, err := p.status("VmHWM")
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("%.0f MiB (idle %.0f) %s", hwm, rss0, countText(codes))
}

// slowConns measures (d): the server under prlimit --nofile=1024:1024,
// 1,100 connections that each send a request header announcing a 1 MiB
// body and then one body byte per second, for at most 20 s; after 5 s of
// that, GET /healthz on a new connection, capped at 10 s.
func (h *harness) slowConns() string {
	p, err := h.start([]string{"prlimit", "--nofile=1024:1024", "--"})
	if err != nil {
		return "error: " + err.Error()
	}
	defer p.kill()
	addr := strings.TrimPrefix(p.url, "http://")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var opened sync.WaitGroup
	var mu sync.Mutex
	dialed := 0
	for range 1100 {
		opened.Add(1)
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err == nil {
				mu.Lock()
				dialed++
				mu.Unlock()
				fmt.Fprintf(c, "POST /v1/models/fixture-echo/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{")
			}
			opened.Done()
			if err != nil {
				return
			}
			defer c.Close()
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for range 20 {
				select {
				case <-stop:
					return
				case <-t.C:
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		})
	}
	opened.Wait()
	time.Sleep(5 * time.Second) // the attack runs a while before the probe
	begin := time.Now()
	code, serr := send(p.url, func(ctx context.Context, url string) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
	}, 10*time.Second)
	took := time.Since(begin)
	close(stop)
	wg.Wait()
	if serr != nil {
		return fmt.Sprintf("none within %.0f s [%s] (%d connections open)", took.Seconds(), statusText(code, serr), dialed)
	}
	return fmt.Sprintf("%d in %.0f ms (%d connections open)", code, float64(took.Microseconds())/1000, dialed)
}

// stuckExit measures (e): SIGTERM during work that outlives the deadline,
// --shutdown-timeout 5s; the exit time is capped at 90 s (then killed).
func (h *harness) stuckExit(transcribe bool) string {
	p, err := h.start(nil, "--shutdown-timeout", "5s")
	if err != nil {
		return "error: " + err.Error()
	}
	defer p.kill()
	model := "asr"
	rq := transcription("asr", wav(1009, 44+2*1009*300))
	if !transcribe {
		model = "stuck"
		if code, err := send(p.url, put("/v1/models/stuck", `{"engine":"fixture","task":"tts","slots":1}`), 30*time.Second); code != 200 {
			return fmt.Sprintf("error: register: %d %v", code, err)
		}
		rq = jsonPost("/v1/models/stuck/infer", `{"input":{"stuck":true,"gate":"never"}}`)
	}
	answered := make(chan string, 1)
	go func() {
		code, err := send(p.url, rq, 100*time.Second)
		answered <- statusText(code, err)
	}()
	if err := awaitActive(p.url, model); err != nil {
		select {
		case s := <-answered:
			return "not running: answered " + s
		default:
			return "error: " + err.Error()
		}
	}
	begin := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return "error: " + err.Error()
	}
	select {
	case <-p.Done():
	case <-time.After(90 * time.Second):
		return "> 90 s"
	}
	took := time.Since(begin)
	status := 0
	var ee *exec.ExitError
	if errors.As(p.Err(), &ee) {
		status = ee.ExitCode()
	}
	return fmt.Sprintf("%.2f s [exit %d]", took.Seconds(), status)
}
