package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/server/internal/edge"
)

// Request bodies at the edge: spooled uploads, the body budgets and the JSON
// body limit (CONTRACT.md edge.upload-spool, edge.body-budget, edge.json-limit).

// blobEngine is an engine that records what each request's payload looked
// like while it ran: the Blob's type and size, Data, Input and the files in
// the spool folder.
type blobEngine struct {
	dir  string
	mu   sync.Mutex
	seen []blobSeen
}

type blobSeen struct {
	file  bool // the Blob is a spool file
	size  int64
	data  int
	input string
	files int
	tail  string
}

func (e *blobEngine) Name() string                       { return "blobcheck" }
func (e *blobEngine) Validate(backends.Spec) error       { return nil }
func (e *blobEngine) Check(backends.Spec) (int64, error) { return 0, nil }
func (e *blobEngine) Probe(context.Context, backends.Spec) (int, error) {
	return 1, nil
}
func (e *blobEngine) Open(context.Context, backends.Spec) (backends.Session, int, error) {
	return blobSession{e}, 1, nil
}

type blobSession struct{ e *blobEngine }

func (s blobSession) Clone(context.Context, int) (backends.Session, error) { return s, nil }
func (s blobSession) Close(context.Context) error                          { return nil }
func (s blobSession) Infer(_ context.Context, req backends.Request, _ backends.Emit) (backends.Output, error) {
	var v blobSeen
	if req.Body != nil {
		_, v.file = req.Body.(interface{ Name() string }) // a spool file (edge.Spooled), not bytes in memory
		v.size = req.Body.Size()
		tail := make([]byte, min(8, v.size))
		if _, err := req.Body.ReadAt(tail, v.size-int64(len(tail))); err != nil {
			return backends.Output{}, err
		}
		v.tail = string(tail)
	}
	v.data, v.input = len(req.Data), string(req.Input)
	ents, err := os.ReadDir(s.e.dir)
	if err != nil {
		return backends.Output{}, err
	}
	v.files = len(ents)
	s.e.mu.Lock()
	s.e.seen = append(s.e.seen, v)
	s.e.mu.Unlock()
	return backends.Output{JSON: json.RawMessage(`{"text":"ok","duration":1}`)}, nil
}

func (e *blobEngine) last(t *testing.T) blobSeen {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.seen) == 0 {
		t.Fatal("the engine saw no request")
	}
	return e.seen[len(e.seen)-1]
}

// startBlobServer serves a blobcheck ASR model "asr" with the spool in a
// private folder.
func startBlobServer(t *testing.T, mutate func(*Config)) (*tserver, *blobEngine) {
	t.Helper()
	eng := &blobEngine{dir: t.TempDir()}
	cfg := testConfig(t)
	cfg.SpoolDir = eng.dir
	cfg.MaxBody = 32 << 20
	if mutate != nil {
		mutate(&cfg)
	}
	logs := &logBuffer{}
	s, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Engines: backends.Registry{eng.Name(): eng}, CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := &tserver{t: t, s: s, logs: logs, client: &http.Client{Transport: &http.Transport{}}}
	t.Cleanup(ts.close)
	ts.serve()
	ts.put("asr", `{"engine":"blobcheck","task":"asr"}`)
	return ts, eng
}

// multipartUpload builds a transcription form with the file part's
// Content-Type ctype.
func multipartUpload(t *testing.T, payload []byte, ctype string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("model", "asr")
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="file"; filename="a.wav"`)
	h.Set("Content-Type", ctype)
	fw, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write(payload)
	_ = mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}

// edge.upload-spool: a 24 MiB upload reaches the engine as a spool file
// (no []byte of its size: Data is empty), one file in the spool folder
// while the request runs and none after; a small upload stays in memory.
func TestUploadSpooled(t *testing.T) {
	ts, eng := startBlobServer(t, nil)
	payload := bytes.Repeat([]byte("0123456789abcdef"), (24<<20)/16)
	copy(payload[len(payload)-8:], "THE-END!")
	ctype, body := multipartUpload(t, payload, "audio/wav")
	ts.must(http.StatusOK, "POST", "/v1/audio/transcriptions", string(body), "Content-Type", ctype)
	v := eng.last(t)
	if !v.file || v.size != int64(len(payload)) || v.data != 0 || v.files != 1 || v.tail != "THE-END!" {
		t.Fatalf("the engine saw %+v", v)
	}
	if ents, _ := os.ReadDir(eng.dir); len(ents) != 0 {
		t.Fatalf("spool files left: %v", ents)
	}
	// The raw-body form spools too.
	ts.must(http.StatusOK, "POST", "/v1/audio/transcriptions?model=asr", string(payload), "Content-Type", "audio/wav")
	if v := eng.last(t); !v.file || v.size != int64(len(payload)) || v.data != 0 || v.files != 1 {
		t.Fatalf("the engine saw %+v", v)
	}
	// A small upload stays in memory.
	small := []byte("RIFF-small-payload")
	ctype, body = multipartUpload(t, small, "audio/wav")
	ts.must(http.StatusOK, "POST", "/v1/audio/transcriptions", string(body), "Content-Type", ctype)
	if v := eng.last(t); v.file || v.size != int64(len(small)) || v.data != len(small) || v.files != 0 {
		t.Fatalf("the engine saw %+v", v)
	}
	if ents, _ := os.ReadDir(eng.dir); len(ents) != 0 {
		t.Fatalf("spool files left: %v", ents)
	}
}

// A request that fails after its upload was spooled (an unknown model)
// leaves no spool file behind.
func TestUploadSpoolRemovedOnError(t *testing.T) {
	ts, eng := startBlobServer(t, nil)
	payload := bytes.Repeat([]byte{1}, 2<<20)
	ts.must(http.StatusNotFound, "POST", "/v1/audio/transcriptions?model=nope", string(payload), "Content-Type", "audio/wav")
	if ents, _ := os.ReadDir(eng.dir); len(ents) != 0 {
		t.Fatalf("spool files left: %v", ents)
	}
}

// edge.upload-l16: audio/L16;rate=N (raw body or the file part) is raw PCM
// at N Hz: the engine input says so; a bad rate is 400; other types pass
// as they are.
func TestUploadDeclaredL16(t *testing.T) {
	ts, eng := startBlobServer(t, nil)
	pcm := make([]byte, 320)
	ts.must(http.StatusOK, "POST", "/v1/audio/transcriptions?model=asr", string(pcm), "Content-Type", "audio/L16; rate=8000")
	if v := eng.last(t); v.input != `{"sample_rate":8000}` {
		t.Fatalf("input %q", v.input)
	}
	ctype, body := multipartUpload(t, pcm, "audio/L16;rate=22050;channels=1")
	ts.must(http.StatusOK, "POST", "/v1/audio/transcriptions", string(body), "Content-Type", ctype)
	if v := eng.last(t); v.input != `{"sample_rate":22050}` {
		t.Fatalf("input %q", v.input)
	}
	ctype, body = multipartUpload(t, pcm, "audio/wav")
	ts.must(http.StatusOK, "POST", "/v1/audio/transcriptions", string(body), "Content-Type", ctype)
	if v := eng.last(t); v.input != "" {
		t.Fatalf("input %q for a WAV", v.input)
	}
	// A rate past the upload bound (192 kHz, engine.upload-bounds) is
	// refused here, naming the header, not handed to the engine.
	for _, bad := range []string{"audio/L16", "audio/L16; rate=12", "audio/L16; rate=192001", "audio/L16; rate=16000; channels=2"} {
		r := ts.must(http.StatusBadRequest, "POST", "/v1/audio/transcriptions?model=asr", string(pcm), "Content-Type", bad)
		var e struct{ Error struct{ Param string } }
		r.json(t, &e)
		if r.errType(t) != "invalid_request_error" || e.Error.Param != "Content-Type" {
			t.Fatalf("%s: %s", bad, r.body)
		}
	}
}

// edge.body-budget: a declared body that does not fit the server-wide
// budget is refused at once with 503 server_busy and Retry-After, without
// reading it; once the body in flight is done, the next one fits.
func TestBodyBudgetRefuses(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		stalledConfig(c)
		c.BodyBudget, c.SpoolThreshold, c.SpoolBudget = 64<<10, 64<<10, 64<<10
	})
	ts.put("a", `{"engine":"fixture"}`)
	body := `{"input":{"pad":"` + strings.Repeat("x", 40<<10) + `"}}`
	first := ts.rawConn()
	if _, err := fmt.Fprintf(first, "POST /v1/models/a/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body)); err != nil {
		t.Fatal(err)
	}
	// The first request's reservation is made after its handler starts:
	// wait for the reservation itself, not the phase.
	ts.awaitConns("the first body's reservation", func([]*edge.Conn) bool {
		mem, _ := ts.s.edge.BodyBytes()
		return mem >= int64(len(body))
	})
	second := ts.rawConn()
	if _, err := fmt.Fprintf(second, "POST /v1/models/a/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body)); err != nil {
		t.Fatal(err)
	}
	res := readAnswer(t, second)
	if res.Header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q", res.Header.Get("Retry-After"))
	}
	requireErr(t, res, http.StatusServiceUnavailable, "server_busy", "body_budget")
	if _, err := io.WriteString(first, body); err != nil {
		t.Fatal(err)
	}
	_ = first.SetReadDeadline(time.Now().Add(waitLimit))
	res, err := http.ReadResponse(bufio.NewReader(first), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	// The fixture refuses the unknown input field; what matters is that
	// the body was read and the reservation given back.
	if res.StatusCode == http.StatusServiceUnavailable {
		t.Fatalf("the first request: %d", res.StatusCode)
	}
	ts.awaitNothingReserved()
	ts.must(http.StatusOK, "POST", "/v1/models/a/infer", `{"input":{}}`)
}

// edge.json-limit: a JSON body over --max-json-body is 413, declared or
// not.
func TestJSONBodyLimit(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxJSONBody = 1 << 10 })
	ts.put("a", `{"engine":"fixture"}`)
	big := `{"input":{"text":"` + strings.Repeat("x", 2<<10) + `"}}`
	r := ts.must(http.StatusRequestEntityTooLarge, "POST", "/v1/models/a/infer", big)
	if r.errType(t) != "invalid_request_error" {
		t.Fatalf("%s", r.body)
	}
	req, _ := http.NewRequest("POST", ts.url+"/v1/models/a/infer", io.MultiReader(strings.NewReader(big))) // chunked: no declared length
	req.Header.Set("Content-Type", "application/json")
	res, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked: %d", res.StatusCode)
	}
}

// edge.body-budget, chunked: a body of unknown length is charged as it
// arrives and refused (503 body_budget) once it outgrows the budgets.
func TestBodyBudgetChunked(t *testing.T) {
	ts, eng := startBlobServer(t, func(c *Config) { c.BodyBudget, c.SpoolThreshold, c.SpoolBudget = 1<<10, 1<<10, 4<<10 })
	req, err := http.NewRequest("POST", ts.url+"/v1/audio/transcriptions?model=asr",
		io.MultiReader(bytes.NewReader(make([]byte, 16<<10)))) // no declared length: chunked
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "audio/wav")
	res, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	requireErr(t, res, http.StatusServiceUnavailable, "server_busy", "body_budget")
	_ = res.Body.Close()
	ts.awaitNothingReserved()
	if ents, _ := os.ReadDir(eng.dir); len(ents) != 0 {
		t.Fatalf("spool files left: %v", ents)
	}
	// Within the budgets it is served.
	req, _ = http.NewRequest("POST", ts.url+"/v1/audio/transcriptions?model=asr", io.MultiReader(bytes.NewReader(make([]byte, 3<<10))))
	req.Header.Set("Content-Type", "audio/wav")
	if res, err = ts.client.Do(req); err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("within the budget: %d", res.StatusCode)
	}
}

// awaitNothingReserved waits until no handler runs, then checks that the
// body budgets are whole again (edge.body-budget).
func (ts *tserver) awaitNothingReserved() {
	ts.t.Helper()
	ts.awaitConns("no handler running", func(cs []*edge.Conn) bool {
		for _, c := range cs {
			if in, _ := c.Phase(); in {
				return false
			}
		}
		return true
	})
	if mem, disk := ts.s.edge.BodyBytes(); mem+disk != 0 {
		ts.t.Fatalf("%d bytes still reserved", mem+disk)
	}
}
