package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// The memory of a /v1/audio/speech answer: what the server holds of a
// long synthesis must not grow with the text. toneEngine synthesises a
// deterministic tone, one piece per character, as the real engines do
// (a stream as chunks through emit, else the whole file), and counts
// the bytes it has made; lagWriter records, at each write of the answer,
// how far the bytes made run ahead of the bytes written.

// toneRate is toneEngine's rate; tonePiece its samples per character.
const (
	toneRate  = 16000
	tonePiece = 1000
)

type toneEngine struct {
	made  atomic.Int64 // PCM16 bytes synthesised, all requests
	stops atomic.Int64 // requests that stopped because emit failed
}

func (e *toneEngine) Name() string                       { return "tone" }
func (e *toneEngine) Validate(backends.Spec) error       { return nil }
func (e *toneEngine) Check(backends.Spec) (int64, error) { return 0, nil }
func (e *toneEngine) Probe(context.Context, backends.Spec) (int, error) {
	return 1, nil
}
func (e *toneEngine) Open(context.Context, backends.Spec) (backends.Session, int, error) {
	return toneSession{e}, 1, nil
}

type toneSession struct{ e *toneEngine }

func (s toneSession) Clone(context.Context, int) (backends.Session, error) { return s, nil }
func (s toneSession) Close(context.Context) error                          { return nil }

// tonePieceAt is piece i of every toneEngine synthesis.
func tonePieceAt(i int) []int16 {
	out := make([]int16, tonePiece)
	for j := range out {
		out[j] = int16((i*tonePiece + j) % 200 * 50)
	}
	return out
}

// toneSamples is the whole synthesis of a text of n characters.
func toneSamples(n int) []int16 {
	var all []int16
	for i := range n {
		all = append(all, tonePieceAt(i)...)
	}
	return all
}

func (s toneSession) Infer(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	r, err := audio.ParseTTS(req.Input)
	if err != nil {
		return backends.Output{}, err
	}
	var all []int16
	for i := range len(r.Text) {
		if err := ctx.Err(); err != nil {
			return backends.Output{}, err
		}
		p := tonePieceAt(i)
		s.e.made.Add(int64(2 * len(p)))
		if req.Stream && emit != nil {
			b, _ := json.Marshal(audio.Chunk{Index: i, SampleRate: toneRate, Audio: base64.StdEncoding.EncodeToString(audio.PCM16Bytes(p))})
			if err := emit(b); err != nil {
				s.e.stops.Add(1)
				return backends.Output{}, err
			}
			continue
		}
		all = append(all, p...)
	}
	if req.Stream && emit != nil {
		return backends.Output{}, nil
	}
	return audio.EncodeTTS(ctx, r, toneRate, all)
}

// lagWriter is a ResponseWriter that records the most bytes the engine
// had made beyond those written, at each write; failAt > 0 fails the
// write that would pass failAt bytes (a client that left).
type lagWriter struct {
	e       *toneEngine
	h       http.Header
	code    int
	body    bytes.Buffer
	maxLag  int64
	writes  int
	failAt  int
	flushes int
}

func (w *lagWriter) Header() http.Header { return w.h }
func (w *lagWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *lagWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.failAt > 0 && w.body.Len()+len(p) > w.failAt {
		return 0, errors.New("client gone")
	}
	w.maxLag = max(w.maxLag, w.e.made.Load()-int64(w.body.Len()))
	w.writes++
	return w.body.Write(p)
}
func (w *lagWriter) Flush() { w.flushes++ }

// speak posts one speech request through the server's handler into a
// lagWriter.
func (e *toneEngine) speak(ts *tserver, body string, failAt int) *lagWriter {
	ts.t.Helper()
	e.made.Store(0)
	req := httptest.NewRequest("POST", "/v1/audio/speech", strings.NewReader(body))
	req.Host = "127.0.0.1"
	req.Header.Set("Content-Type", "application/json")
	w := &lagWriter{e: e, h: http.Header{}, failAt: failAt}
	ts.s.Handler().ServeHTTP(w, req)
	return w
}

// A long speech answer (8 MB of PCM, 4,000 characters) is written as it
// is synthesised: at no write have more than 2 MiB been made and not yet
// written (the whole file held until the end ran 8 MB ahead), and the
// bytes are the whole file's (wav: past a header whose sizes say
// "unknown"; pcm, mp3 and flac: the same bytes). A short one is still the whole file
// with its Content-Length, byte for byte. A client that leaves stops the
// synthesis.
func TestSpeechMemoryBoundedByChunk(t *testing.T) {
	e := &toneEngine{}
	ts := newServerOpts(t, testConfig(t), Options{Engines: backends.Registry{e.Name(): e}})
	ts.put("tts", `{"engine":"tone","task":"tts"}`)
	const long, short = 4000, 20
	text := func(n int) string { return strings.Repeat("a", n) }
	const bound = 2 << 20

	whole := audio.PCM16Bytes(toneSamples(long))
	w := e.speak(ts, `{"model":"tts","input":"`+text(long)+`","response_format":"pcm","sample_rate":16000}`, 0)
	if w.code != http.StatusOK || !bytes.Equal(w.body.Bytes(), whole) {
		t.Fatalf("pcm: status %d, %d bytes; want the whole %d bytes", w.code, w.body.Len(), len(whole))
	}
	if w.maxLag > bound {
		t.Errorf("pcm: %d bytes made and not written at one write (bound %d): the answer is held whole", w.maxLag, bound)
	}
	w = e.speak(ts, `{"model":"tts","input":"`+text(long)+`"}`, 0)
	got := w.body.Bytes()
	if w.code != http.StatusOK || len(got) != 44+len(whole) || !bytes.Equal(got[44:], whole) || string(got[:4]) != "RIFF" {
		t.Fatalf("wav: status %d, %d bytes; want a header and the whole %d bytes", w.code, len(got), len(whole))
	}
	if w.maxLag > bound {
		t.Errorf("wav: %d bytes made and not written at one write (bound %d): the answer is held whole", w.maxLag, bound)
	}
	if size := binary.LittleEndian.Uint32(got[40:]); size != uint32(len(whole)) && size != 0xFFFFFFFF-36 {
		t.Errorf("wav data size %#x: neither the data's nor unknown", size)
	}
	if a, err := audio.ParseWAV(got); err != nil || len(a.Samples) != long*tonePiece || a.Rate != toneRate {
		t.Errorf("wav does not parse back: %d samples at %d Hz, %v", len(a.Samples), a.Rate, err)
	}

	w = e.speak(ts, `{"model":"tts","input":"`+text(short)+`"}`, 0)
	if want := audio.WAV(toneRate, toneSamples(short)); !bytes.Equal(w.body.Bytes(), want) || w.h.Get("Content-Length") != "40044" {
		t.Errorf("short wav: %d bytes, Content-Length %q; want the whole file, %d bytes", w.body.Len(), w.h.Get("Content-Length"), len(want))
	}

	// mp3 and flac are encoded chunk by chunk into the whole file's bytes.
	for _, f := range []string{"mp3", "flac"} {
		const n = 300
		want, ct, _, err := audio.Encode(context.Background(), f, toneRate, toneSamples(n))
		if err != nil {
			t.Fatal(err)
		}
		w = e.speak(ts, `{"model":"tts","input":"`+text(n)+`","response_format":"`+f+`"}`, 0)
		if w.code != http.StatusOK || w.h.Get("Content-Type") != ct || !bytes.Equal(w.body.Bytes(), want) {
			t.Errorf("%s: status %d, %q, %d bytes; want the whole file's %d bytes", f, w.code, w.h.Get("Content-Type"), w.body.Len(), len(want))
		}
	}

	// The client leaves after 3 MB: the engine's emit fails and it stops.
	stops := e.stops.Load()
	w = e.speak(ts, `{"model":"tts","input":"`+text(long)+`","response_format":"pcm","sample_rate":16000}`, 3<<20)
	if e.stops.Load() != stops+1 || e.made.Load() >= int64(len(whole)) || w.body.Len() > 3<<20 {
		t.Errorf("after the client left at 3 MB (%d written): %d of %d bytes made, %d stops; want the synthesis stopped", w.body.Len(), e.made.Load(), len(whole), e.stops.Load()-stops)
	}
}
