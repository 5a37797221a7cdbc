package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
)

// eventHoldListener hands out connections that hold the server's goroutine
// in the write that completes a streamed answer's last event (the event
// that holds marker, ended by its blank line; marker "": the chunked
// body's end, for a raw audio stream), after the bytes went out, until
// the test lets it go: the client has the whole last event while the
// server has not yet returned from writing it.
type eventHoldListener struct {
	net.Listener
	marker string
	held   chan chan struct{}
}

func (l *eventHoldListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &eventHoldConn{Conn: c, l: l}, nil
}

type eventHoldConn struct {
	net.Conn
	l    *eventHoldListener
	buf  []byte // the response so far, as sent
	done bool   // this response's last event was held once
}

func (c *eventHoldConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.buf = append(c.buf, p[:n]...)
	if err == nil && !c.done && (c.l.marker == "" && bytes.HasSuffix(c.buf, []byte("\r\n0\r\n\r\n")) ||
		c.l.marker != "" && lastEventComplete(chunkedBody(c.buf), c.l.marker)) {
		c.done = true
		release := make(chan struct{})
		c.l.held <- release
		<-release
	}
	return n, err
}

// chunkedBody is the body so far of b, an HTTP/1.1 response with a chunked
// body, without its chunk framing (nil before the headers end).
func chunkedBody(b []byte) []byte {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return nil
	}
	var body []byte
	for rest := b[end+4:]; ; {
		line := bytes.Index(rest, []byte("\r\n"))
		if line < 0 {
			return body
		}
		n, err := strconv.ParseInt(string(rest[:line]), 16, 64)
		if err != nil || n == 0 {
			return body
		}
		rest = rest[line+2:]
		if int64(len(rest)) < n {
			return append(body, rest...)
		}
		body = append(body, rest[:n]...)
		rest = rest[n:]
		if len(rest) < 2 {
			return body
		}
		rest = rest[2:]
	}
}

// lastEventComplete reports whether body holds marker in an event that
// its blank line ended: what an SSE client needs to dispatch it.
func lastEventComplete(body []byte, marker string) bool {
	i := bytes.LastIndex(body, []byte(marker))
	return i >= 0 && bytes.Contains(body[i:], []byte("\n\n"))
}

// readEvents reads body until it holds marker's event whole, as an SSE
// client does before it acts on the stream's last event (it does not wait
// for the body's end); marker "" reads the body to its end.
func readEvents(body io.Reader, marker string) ([]byte, error) {
	if marker == "" {
		return io.ReadAll(body)
	}
	var got []byte
	buf := make([]byte, 4096)
	for !lastEventComplete(got, marker) {
		n, err := body.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			if lastEventComplete(got, marker) {
				break
			}
			return got, err
		}
	}
	return got, nil
}

// One client alternating three models with streamed requests, one after
// another, under --max-loaded-models 1: each stream's lease is released
// before its last event is complete (CONTRACT.md phase.stream-deferred),
// so the client's next request, sent as soon as it has parsed that event,
// never finds the only resident model still leased and is never refused
// 503. The server's goroutine is held in the write that completes each
// stream's last event until the next request was answered: with the lease
// released after that write, every request that must evict was refused.
func TestSequentialStreamsNeverFindOwnLease(t *testing.T) {
	multipartStream := func() (string, string) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		fw, _ := mw.CreateFormFile("file", "a.wav")
		_, _ = fw.Write([]byte("RIFF"))
		_ = mw.WriteField("model", "%s")
		_ = mw.WriteField("stream", "true")
		_ = mw.Close()
		return mw.FormDataContentType(), b.String()
	}
	mpType, mpBody := multipartStream()
	for _, tc := range []struct {
		name, engine, task, checkpoint, path, ctype, body, marker string
	}{
		{"infer", "fixture", "", "ck", "/v1/models/%s/infer", "application/json", `{"input":1,"stream":true}`, "data: [DONE]"},
		{"transcription", "fixture", "asr", "ck", "/v1/audio/transcriptions", mpType, mpBody, "data: [DONE]"},
		// a client that acts on the transcript's done event, before [DONE]
		{"transcription-done", "fixture", "asr", "ck", "/v1/audio/transcriptions", mpType, mpBody, `"transcript.text.done"`},
		{"speech-sse", "flite", "tts", catalogue.FliteSLT, "/v1/audio/speech", "application/json",
			`{"model":"%s","input":"Hi.","response_format":"pcm","stream_format":"sse"}`, `"speech.audio.done"`},
		{"speech-audio", "flite", "tts", catalogue.FliteSLT, "/v1/audio/speech", "application/json",
			`{"model":"%s","input":"Hi.","response_format":"pcm","stream_format":"audio"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.MaxLoadedModels = 1
			opts := Options{}
			if tc.engine != "fixture" {
				if err := engines.BuildDefaultRoot(cfg.ModelsRoot, "", tc.checkpoint); err != nil {
					t.Fatal(err)
				}
				opts.Engines = engines.Registry(engines.Config{})
			}
			ts := newServerOpts(t, cfg, opts)
			models := []string{"m0", "m1", "m2"}
			for _, m := range models {
				spec := ModelSpec{Engine: tc.engine, Task: tc.task, Checkpoint: tc.checkpoint, Slots: json.RawMessage("1")}
				if err := ts.s.RegisterModels(context.Background(), []ModelEntry{{ID: m, Spec: spec}}); err != nil {
					t.Fatal(err)
				}
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			hl := &eventHoldListener{Listener: ln, marker: tc.marker, held: make(chan chan struct{}, 1)}
			ts.addr = ln.Addr().String()
			ts.url = "http://" + ts.addr
			ts.served = make(chan error, 1)
			go func() { ts.served <- ts.s.Serve(hl) }()
			var mu sync.Mutex
			var prev chan struct{}
			releasePrev := func() {
				mu.Lock()
				defer mu.Unlock()
				if prev != nil {
					close(prev)
					prev = nil
				}
			}
			t.Cleanup(releasePrev)
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			const n = 30
			refused := 0
			for i := 0; i < n; i++ {
				m := models[i%len(models)]
				path, body := tc.path, tc.body
				if strings.Contains(path, "%s") {
					path = fmt.Sprintf(path, m)
				} else {
					body = strings.Replace(body, "%s", m, 1)
				}
				res, err := client.Post(ts.url+path, tc.ctype, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if res.StatusCode != 200 {
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					if res.StatusCode == http.StatusServiceUnavailable {
						refused++
						releasePrev()
						continue
					}
					t.Fatalf("request %d on %s: %d %s", i, m, res.StatusCode, b)
				}
				if b, err := readEvents(res.Body, tc.marker); err != nil {
					t.Fatalf("request %d on %s: %v after %q", i, m, err, b)
				}
				res.Body.Close()
				h := <-hl.held // this stream's last write, held
				releasePrev()  // the one before it may now return
				mu.Lock()
				prev = h
				mu.Unlock()
			}
			releasePrev()
			t.Logf("%d of %d streamed requests refused 503", refused, n)
			if refused != 0 {
				t.Fatalf("%d of %d sequential streamed requests were refused 503: a request found the previous one's lease", refused, n)
			}
		})
	}
}
