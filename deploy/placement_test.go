package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// placementModels are the model IDs the placement test sends.
var placementModels = []string{"asr", "tts", "vad", "whisper-base", "diarization"}

// placementRepeat is how often each call shape is sent per model.
const placementRepeat = 3

// unplaced is the one call shape whose model the proxy cannot see by
// design (deploy/haproxy/haproxy.cfg: a file-first body larger than the
// buffer, no hint): counted in the table, not held to one replica.
const unplaced = "sdk multipart: large file first, no hint"

// TestHAProxyPlacement: deploy/haproxy/haproxy.cfg, hashing by model,
// sends every request of one model to one replica, whichever way the
// request names its model: the path, ?model=, a JSON body, a multipart
// body (the openai SDK's own transcription and translation calls, in the
// field orders its usual calls produce, and curl's), or the X-Sluice-Model
// hint of an upload larger than the proxy's buffer. Three loopback
// replicas record which model each request they get is for, parsed as
// Sluice parses it; the test prints the placement table (model → requests
// per replica) and requires each model on exactly one replica across
// every shape. $SLUICE_HAPROXY_CFG runs another configuration (the
// comparison with an older one).
func TestHAProxyPlacement(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		bin = "/usr/sbin/haproxy"
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (make deps installs it): %v", err)
	}
	mods := filepath.Join("..", ".deps", "npm", "node_modules")
	if p := os.Getenv("SLUICE_NPM_PREFIX"); p != "" {
		mods = filepath.Join(p, "node_modules")
	}
	if _, err := os.Stat(filepath.Join(mods, "openai", "package.json")); err != nil {
		t.Fatalf("the openai npm package is missing (make deps installs it): %v", err)
	}
	mods, err = filepath.Abs(mods)
	if err != nil {
		t.Fatal(err)
	}
	cfg := "haproxy/haproxy.cfg"
	if c := os.Getenv("SLUICE_HAPROXY_CFG"); c != "" {
		cfg = c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	reps := make([]*fakeReplica, 3)
	for i := range reps {
		reps[i] = startFakeReplica(t, fmt.Sprintf("s%d", i+1))
	}
	front := startHAProxy(t, ctx, bin, cfg, reps)

	dir := t.TempDir()
	small, large := filepath.Join(dir, "small.wav"), filepath.Join(dir, "large.wav")
	if err := os.WriteFile(small, wav(3*16000), 0o644); err != nil { // 3 s, 96 KB: within the buffer
		t.Fatal(err)
	}
	if err := os.WriteFile(large, wav(40*16000), 0o644); err != nil { // 40 s, 1.28 MB: past the 1 MiB buffer
		t.Fatal(err)
	}

	// The SDK's calls.
	cmd := exec.CommandContext(ctx, node, "testdata/placement.mjs")
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods, "PLACEMENT_BASE_URL=http://"+front+"/v1",
		"PLACEMENT_MODELS="+strings.Join(placementModels, ","), "PLACEMENT_FILE="+small,
		"PLACEMENT_LARGE_FILE="+large, fmt.Sprintf("PLACEMENT_REPEAT=%d", placementRepeat))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node placement.mjs: %v\n%s", err, stderr.Bytes())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var l struct {
			Kind, Model, Error string
			OK                 bool
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("placement.mjs line %q: %v", sc.Text(), err)
		}
		if !l.OK {
			t.Errorf("%s, model %s: %s", l.Kind, l.Model, l.Error)
		}
	}

	// The calls without the SDK: curl's field order, ?model= on a raw
	// body, the path.
	audio, err := os.ReadFile(small)
	if err != nil {
		t.Fatal(err)
	}
	long, err := os.ReadFile(large)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range placementModels {
		for range placementRepeat {
			send(t, ctx, front, "curl multipart: -F model -F file", "POST", "/v1/audio/transcriptions", multipartBody(t, m, audio))
			send(t, ctx, front, "curl multipart: -F model -F file, 1.28 MB", "POST", "/v1/audio/transcriptions", multipartBody(t, m, long))
			send(t, ctx, front, "multipart: quoted boundary, file first, part headers", "POST", "/v1/audio/transcriptions", craftedBody(m, audio))
			send(t, ctx, front, "query: raw body ?model=", "POST", "/v1/audio/transcriptions?model="+m, request{"audio/wav", audio})
			send(t, ctx, front, "path: /v2/models/{m}/infer", "POST", "/v2/models/"+m+"/infer",
				request{"application/json", []byte(`{"inputs":[{"name":"text","shape":[1],"datatype":"BYTES","data":["hi"]}]}`)})
			send(t, ctx, front, "path: /v1/models/{m}", "GET", "/v1/models/"+m, request{})
		}
	}

	// The table, then the verdict.
	got := map[string]map[string][3]int{} // kind → model → requests per replica
	for i, r := range reps {
		r.mu.Lock()
		for _, h := range r.hits {
			if h.err != "" {
				t.Errorf("replica %s: %s request: %s", r.name, h.kind, h.err)
				continue
			}
			if got[h.kind] == nil {
				got[h.kind] = map[string][3]int{}
			}
			c := got[h.kind][h.model]
			c[i]++
			got[h.kind][h.model] = c
		}
		r.mu.Unlock()
	}
	var tb strings.Builder
	fmt.Fprintf(&tb, "placement with %s: requests per replica s1/s2/s3\n\n| call |", cfg)
	for _, m := range placementModels {
		fmt.Fprintf(&tb, " %s |", m)
	}
	tb.WriteString("\n|---|" + strings.Repeat("---|", len(placementModels)) + "\n")
	kinds := slices.Sorted(func(yield func(string) bool) {
		for k := range got {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range kinds {
		fmt.Fprintf(&tb, "| %s |", k)
		for _, m := range placementModels {
			c := got[k][m]
			fmt.Fprintf(&tb, " %d/%d/%d |", c[0], c[1], c[2])
		}
		tb.WriteString("\n")
	}
	t.Log(tb.String())

	total := map[string][3]int{} // model → its requests per replica, every shape but the unplaced one
	for _, k := range kinds {
		if k == unplaced {
			continue
		}
		for _, m := range placementModels {
			c := got[k][m]
			if c[0]+c[1]+c[2] != placementRepeat {
				t.Errorf("%s, model %s: %d requests reached the replicas, want %d", k, m, c[0]+c[1]+c[2], placementRepeat)
			}
			tc := total[m]
			for i := range c {
				tc[i] += c[i]
			}
			total[m] = tc
		}
	}
	for _, m := range placementModels {
		c := total[m]
		if (c[0] > 0 && c[1] > 0) || (c[0] > 0 && c[2] > 0) || (c[1] > 0 && c[2] > 0) {
			t.Errorf("model %s is on more than one replica: s1/s2/s3 %d/%d/%d", m, c[0], c[1], c[2])
		}
	}
	if len(kinds) < 13 {
		t.Errorf("the replicas saw %d call shapes, want 13 or more: %v", len(kinds), kinds)
	}
}

// request is a body and its Content-Type.
type request struct {
	contentType string
	body        []byte
}

// send sends one request through the proxy, tagged with its kind, and
// requires a 200.
func send(t *testing.T, ctx context.Context, front, kind, method, path string, r request) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+front+path, bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	req.Header.Set("X-Placement-Kind", kind)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		t.Errorf("%s %s: %s", method, path, res.Status)
	}
}

// multipartBody is curl's -F model=m -F file=@a.wav: the model first.
func multipartBody(t *testing.T, model string, audio []byte) request {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.WriteField("model", model); err != nil {
		t.Fatal(err)
	}
	f, err := w.CreateFormFile("file", "a.wav")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(audio); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return request{w.FormDataContentType(), b.Bytes()}
}

// craftedBody is a multipart body as other clients write it: a quoted
// boundary with a space, the file first, a lower-case header name and a
// Content-Type on the model part.
func craftedBody(model string, audio []byte) request {
	const bd = "b=1 x"
	var b bytes.Buffer
	b.WriteString("--" + bd + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\n")
	b.Write(audio)
	b.WriteString("\r\n--" + bd + "\r\ncontent-disposition: form-data; name=\"model\"\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + model)
	b.WriteString("\r\n--" + bd + "--\r\n")
	return request{`multipart/form-data; boundary="` + bd + `"`, b.Bytes()}
}

// wav is a mono 16 kHz 16-bit WAV of n samples, every byte pattern
// present (NUL bytes too: a body is binary).
func wav(n int) []byte {
	b := make([]byte, 44+2*n)
	copy(b, "RIFF")
	copy(b[8:], "WAVEfmt ")
	b[16], b[20], b[22] = 16, 1, 1
	b[24], b[25] = 0x80, 0x3e // 16000
	b[28], b[29] = 0x00, 0x7d // 32000 bytes/s
	b[32], b[34] = 2, 16
	copy(b[36:], "data")
	for i := 44; i < len(b); i++ {
		b[i] = byte(i * 7)
	}
	return b
}

// hit is one request a fake replica got: its kind (X-Placement-Kind) and
// its model as Sluice reads it.
type hit struct{ kind, model, err string }

// fakeReplica is a loopback HTTP server that answers the proxy's health
// check and records the model of every other request.
type fakeReplica struct {
	name, addr string
	checked    chan struct{} // closed at the first health check
	once       sync.Once
	mu         sync.Mutex
	hits       []hit
}

// startFakeReplica serves a fake replica on a loopback port until the
// test ends.
func startFakeReplica(t *testing.T, name string) *fakeReplica {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeReplica{name: name, addr: ln.Addr().String(), checked: make(chan struct{})}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return r
}

var pathModel = regexp.MustCompile(`^/v[12]/models/([^/]+)`)

// ServeHTTP answers a health check, or records the request's model as
// Sluice finds it (path, ?model=, JSON "model", multipart part "model").
func (r *fakeReplica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/v2/health/ready" {
		r.once.Do(func() { close(r.checked) })
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ready":true}`)
		return
	}
	h := hit{kind: req.Header.Get("X-Placement-Kind")}
	ct, params, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	switch {
	case pathModel.MatchString(req.URL.Path):
		h.model = pathModel.FindStringSubmatch(req.URL.Path)[1]
		_, _ = io.Copy(io.Discard, req.Body)
	case req.URL.Query().Has("model"):
		h.model = req.URL.Query().Get("model")
		_, _ = io.Copy(io.Discard, req.Body)
	case ct == "application/json":
		var v struct{ Model string }
		if err := json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&v); err != nil {
			h.err = err.Error()
		}
		h.model = v.Model
	case ct == "multipart/form-data":
		mr := multipart.NewReader(req.Body, params["boundary"])
		for {
			p, err := mr.NextPart()
			if err != nil {
				if err != io.EOF {
					h.err = err.Error()
				}
				break
			}
			if p.FormName() == "model" {
				b, err := io.ReadAll(io.LimitReader(p, 256))
				if err != nil {
					h.err = err.Error()
				}
				h.model = string(b)
			}
			_, _ = io.Copy(io.Discard, p)
		}
	}
	if h.model == "" && h.err == "" {
		h.err = fmt.Sprintf("%s %s: no model", req.Method, req.URL)
	}
	r.mu.Lock()
	r.hits = append(r.hits, h)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"text":"ok"}`)
}

// startHAProxy runs haproxy in the foreground with cfg in front of the
// replicas, hashing by model, until the test ends; it returns the
// proxy's address once every replica has had a health check (the proxy
// listens by then).
func startHAProxy(t *testing.T, ctx context.Context, bin, cfg string, reps []*fakeReplica) string {
	ports := make([]string, 2)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().String()
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-db", "-f", cfg)
	cmd.Env = append(os.Environ(), "SLUICE_FRONT="+ports[0], "SLUICE_STATS="+ports[1], "SLUICE_BALANCE=hdr(X-Sluice-Model)",
		"SLUICE_RETRIES=3", "SLUICE_HAPROXY_DIR=haproxy", "SLUICE_S1="+reps[0].addr, "SLUICE_S2="+reps[1].addr, "SLUICE_S3="+reps[2].addr)
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start haproxy (make deploy-test installs it): %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	for _, r := range reps {
		select {
		case <-r.checked:
		case <-exited:
			t.Fatalf("haproxy exited:\n%s", log.String())
		case <-ctx.Done():
			t.Fatalf("no health check reached %s:\n%s", r.name, log.String())
		}
	}
	return ports[0]
}

// syncBuffer is a bytes.Buffer for a process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 1<<20 {
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
