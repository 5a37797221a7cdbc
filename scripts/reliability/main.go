// Command reliability is `make reliability` (issue 13, "The serving edge
// survives hostile clients, crashes and restarts"): the issue's attacks
// against a built `sluice` binary, one table of figures, each beside the
// same figure of a baseline binary from the same run (-baseline).
//
// Every figure starts its own server process (so peak RSS is that of one
// attack), `serve --parallel-jobs --ui-management --fixture --models-root
// DIR --listen 127.0.0.1:0` like `make run`, on loopback only, and kills it
// at the end. Every wait is capped; a cap that passes prints "> CAP".
//
//	(a) CPU seconds (utime+stime from /proc/PID/stat, the delta around the
//	    request) and peak RSS (VmHWM from /proc/PID/status after it) of one
//	    transcription of a 256 KiB and of a 1 MiB 16-bit mono WAV at
//	    1009 Hz (model asr, pocketsphinx), and of one /v1/audio/speech
//	    request with "sample_rate": 383999 (model tts, flite).
//	(b) Seconds until a stalled stream's slot frees: a fixture stream of
//	    10,000 chunks on a one-slot model whose client never reads (its
//	    receive buffer set to 4 KiB), then an unload of that model and a
//	    request behind it: the time until that request is answered.
//	(c) Peak RSS with 20 concurrent 24 MiB WAV uploads to
//	    /v1/audio/transcriptions: at 16 kHz (c1: 786 s, over max_seconds,
//	    refused) and at 44.1 kHz (c2: 285 s, decoded and transcribed).
//	(d) /healthz's answer time with 1,100 slow connections open (each sent
//	    a request header and then one body byte per second) while the
//	    server runs under `prlimit --nofile=1024:1024`.
//	(e) Exit time after SIGTERM with --shutdown-timeout 5s: (e1) during a
//	    fixture request that ignores its context (input stuck, held at a
//	    gate; a binary without stuck cancels it at the deadline), (e2)
//	    during an amplified transcription (300 s of audio, pocketsphinx's
//	    max_seconds, at 1009 Hz).
//
// Size and duration: about 8 server starts per binary; the attacks send
// about 500 MiB over loopback per binary and take 1 to 4 minutes per binary
// (longest when a stalled stream or a stuck exit hits its cap). It needs the
// default models root (`make models`) and the real engines' libraries.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
)

func main() {
	bin := flag.String("binary", "", "sluice binary to attack (default: build ./cmd/sluice)")
	base := flag.String("baseline", "", "baseline sluice binary, measured in the same run beside -binary")
	root := flag.String("models-root", "models", "models root (make models)")
	only := flag.String("only", "", "run only the figures whose key starts with this (a, b, c, d, e)")
	flag.Parse()
	if err := run(*bin, *base, *root, *only); err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(1)
	}
}

// figure is one row: a key, what it measures, and a measurement per binary.
type figure struct {
	key, what string
	measure   func(h *harness) string
}

func run(bin, base, root, only string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "pocketsphinx-en-us")); err != nil {
		return fmt.Errorf("models root %s lacks pocketsphinx-en-us (make models): %w", root, err)
	}
	if bin == "" {
		dir, err := os.MkdirTemp("", "sluice-reliability-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "sluice")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/sluice").CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/sluice: %w\n%s", err, out)
		}
	}
	raiseNoFile()
	bins := []string{bin}
	if base != "" {
		bins = append(bins, base)
	}
	hs := make([]*harness, len(bins))
	for i, b := range bins {
		hs[i] = &harness{bin: b, root: root}
	}
	var rows [][]string
	for _, f := range figures() {
		if !strings.HasPrefix(f.key, only) {
			continue
		}
		row := []string{f.key, f.what}
		for _, h := range hs {
			fmt.Fprintf(os.Stderr, "reliability: %s %s ...\n", f.key, h.bin)
			row = append(row, f.measure(h))
		}
		rows = append(rows, row)
	}
	fmt.Println("binary:  ", bin)
	if base != "" {
		fmt.Println("baseline:", base)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	head := "fig\twhat\tbinary"
	if base != "" {
		head += "\tbaseline"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func figures() []figure {
	return []figure{
		{"a1", "transcription, 256 KiB WAV @1009 Hz: CPU s, peak RSS MiB [status]", func(h *harness) string {
			return h.oneRequest(transcription("asr", wav(1009, 256<<10)))
		}},
		{"a2", "transcription, 1 MiB WAV @1009 Hz: CPU s, peak RSS MiB [status]", func(h *harness) string {
			return h.oneRequest(transcription("asr", wav(1009, 1<<20)))
		}},
		{"a3", "speech, sample_rate 383999: CPU s, peak RSS MiB [status]", func(h *harness) string {
			return h.oneRequest(jsonPost("/v1/audio/speech", `{"model":"tts","input":"Open the garage door.","sample_rate":383999}`))
		}},
		{"b", "stalled stream, then unload + request behind it: s until answered", (*harness).stalledStream},
		{"c1", "20 concurrent 24 MiB WAV uploads @16 kHz (786 s, over max_seconds): peak RSS MiB [statuses]", func(h *harness) string {
			return h.bigUploads(16000)
		}},
		{"c2", "20 concurrent 24 MiB WAV uploads @44.1 kHz (285 s, decoded): peak RSS MiB [statuses]", func(h *harness) string {
			return h.bigUploads(44100)
		}},
		{"d", "1,100 slow connections, nofile 1024: /healthz answer", (*harness).slowConns},
		{"e1", "SIGTERM, --shutdown-timeout 5s, stuck fixture call: exit s [status]", func(h *harness) string {
			return h.stuckExit(false)
		}},
		{"e2", "SIGTERM, --shutdown-timeout 5s, 300 s WAV @1009 Hz transcribing: exit s [status]", func(h *harness) string {
			return h.stuckExit(true)
		}},
	}
}

// raiseNoFile lifts this process's descriptor limit to its hard limit: (d)
// holds 1,100 connections.
func raiseNoFile() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// harness runs one binary.
type harness struct {
	bin, root string
}

// proc is one running server.
type proc struct {
	cmd  *exec.Cmd
	url  string
	logs *bytes.Buffer
	mu   sync.Mutex
	done chan struct{}
	err  error
}

var listeningRe = regexp.MustCompile(`msg=listening addr=(\S+)`)

// start runs the server (through prefix, e.g. prlimit) and waits up to 60 s
// for its listening line: the startup models are loaded by then.
func (h *harness) start(prefix []string, extra ...string) (*proc, error) {
	args := append(append([]string{}, prefix...), h.bin, "serve", "--parallel-jobs", "--ui-management", "--fixture",
		"--models-root", h.root, "--listen", "127.0.0.1:0")
	args = append(args, extra...)
	cmd := exec.Command(args[0], args[1:]...)
	pr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, logs: &bytes.Buffer{}, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := listeningRe.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
		p.err = cmd.Wait()
		close(p.done)
	}()
	select {
	case a := <-addr:
		p.url = "http://" + a
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited before listening: %v\n%s", h.bin, p.err, p.log())
	case <-time.After(60 * time.Second):
		p.kill()
		return nil, fmt.Errorf("%s did not listen within 60 s", h.bin)
	}
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// kill ends the process and waits for it (at most 10 s).
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// cpu returns utime+stime of the process in seconds (/proc/PID/stat, in
// clock ticks of 1/100 s, Linux's USER_HZ).
func (p *proc) cpu() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 (state) on
	if len(f) < 13 {
		return 0, errors.New("short /proc/PID/stat")
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (ut + st) / 100, nil
}

// status returns a /proc/PID/status field in MiB (VmHWM, VmRSS).
func (p *proc) status(field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/PID/status", field)
}

// request is one HTTP request to build against a server.
type request func(ctx context.Context, url string) (*http.Request, error)

func jsonPost(path, body string) request {
	return func(ctx context.Context, url string) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, strings.NewReader(body))
		if err == nil {
			r.Header.Set("Content-Type", "application/json")
		}
		return r, err
	}
}

// transcription is a multipart upload of data as file (a WAV) for model.
func transcription(model string, data []byte) request {
	return func(ctx context.Context, url string) (*http.Request, error) {
		var head bytes.Buffer
		mw := multipart.NewWriter(&head)
		_ = mw.WriteField("model", model)
		if _, err := mw.CreateFormFile("file", "a.wav"); err != nil {
			return nil, err
		}
		tail := "\r\n--" + mw.Boundary() + "--\r\n"
		body := io.MultiReader(bytes.NewReader(head.Bytes()), bytes.NewReader(data), strings.NewReader(tail))
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/audio/transcriptions", body)
		if err != nil {
			return nil, err
		}
		r.ContentLength = int64(head.Len() + len(data) + len(tail))
		r.Header.Set("Content-Type", mw.FormDataContentType())
		return r, nil
	}
}

// wav is a 16-bit mono WAV of size bytes (header included) at rate Hz: a
// 440 Hz tone at half scale.
func wav(rate, size int) []byte {
	n := (size - 44) / 2
	b := make([]byte, 44+2*n)
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(36+2*n))
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1)
	binary.LittleEndian.PutUint16(b[22:], 1)
	binary.LittleEndian.PutUint32(b[24:], uint32(rate))
	binary.LittleEndian.PutUint32(b[28:], uint32(rate*2))
	binary.LittleEndian.PutUint16(b[32:], 2)
	binary.LittleEndian.PutUint16(b[34:], 16)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(2*n))
	for i := range n {
		v := int16(16000 * math.Sin(2*math.Pi*440*float64(i)/float64(rate)))
		binary.LittleEndian.PutUint16(b[44+2*i:], uint16(v))
	}
	return b
}

var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// send runs one request to its answer's end within limit; it returns the
// status (0 on a transport failure) and the error.
func send(url string, rq request, limit time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	r, err := rq(ctx, url)
	if err != nil {
		return 0, err
	}
	res, err := client.Do(r)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, err = io.Copy(io.Discard, res.Body)
	return res.StatusCode, err
}

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

func statusText(code int, err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within cap"
	case err != nil && code == 0:
		return "transport error"
	}
	return strconv.Itoa(code)
}

// getJSON reads a JSON object from path within 5 s.
func getJSON(url, path string) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, url+path, nil)
	if err != nil {
		return nil, err
	}
	res, err := client.Do(r)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var m map[string]any
	err = json.NewDecoder(res.Body).Decode(&m)
	return m, err
}

// awaitActive polls the model until it has at least one active slot:
// at most 400 polls, 25 ms apart (10 s).
func awaitActive(url, model string) error {
	for range 400 {
		m, err := getJSON(url, "/v1/models/"+model)
		if err == nil {
			if n, _ := m["active_slots"].(float64); n >= 1 {
				return nil
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("model %s never had an active slot within 10 s", model)
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

func put(path, body string) request {
	return func(ctx context.Context, url string) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPut, url+path, strings.NewReader(body))
		if err == nil {
			r.Header.Set("Content-Type", "application/json")
		}
		return r, err
	}
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

func countText(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d×%s", m[k], k))
	}
	return "[" + strings.Join(parts, " ") + "]"
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
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return "error: " + err.Error()
	}
	select {
	case <-p.done:
	case <-time.After(90 * time.Second):
		return "> 90 s"
	}
	took := time.Since(begin)
	status := 0
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		status = ee.ExitCode()
	}
	return fmt.Sprintf("%.2f s [exit %d]", took.Seconds(), status)
}
