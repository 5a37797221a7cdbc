package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/flite"
	"github.com/sluice-dev/sluice/backends/onnx"
	"github.com/sluice-dev/sluice/backends/pocketsphinx"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/server/internal/realtime"
)

// The live-session tests (CONTRACT.md "Live sessions") run the real
// pocketsphinx engine on flite's speech; a missing library fails them
// (make deps installs both).

var (
	rtOnce   sync.Once
	rtSpeech []int16 // "Turn on the kitchen lights." at 24 kHz
	rtErr    error
)

const rtSentence = "Turn on the kitchen lights."

// rtAudio returns the test sentence as 24 kHz PCM16.
func rtAudio(t *testing.T) []int16 {
	t.Helper()
	rtOnce.Do(func() {
		if rtErr = flite.Available(); rtErr != nil {
			return
		}
		s, _, err := flite.New().Open(context.Background(), backends.Spec{Task: "tts", Checkpoint: "slt", Slots: 1})
		if err != nil {
			rtErr = err
			return
		}
		defer s.Close(context.Background())
		in, _ := json.Marshal(audio.TTSRequest{Text: rtSentence})
		out, err := s.Infer(context.Background(), backends.Request{Input: in}, nil)
		if err != nil {
			rtErr = err
			return
		}
		a, err := audio.ParseWAV(out.Data)
		if err != nil {
			rtErr = err
			return
		}
		rtSpeech = audio.Resample(a.Samples, a.Rate, realtime.Rate)
	})
	if rtErr != nil {
		t.Fatalf("flite: %v (make deps installs it)", rtErr)
	}
	return rtSpeech
}

// startRealtime serves the real engines with model "asr" (pocketsphinx,
// slots slots) registered and loaded, on loopback.
func startRealtime(t *testing.T, slots int, mutate func(*Config)) *tserver {
	t.Helper()
	return startRealtimeWith(t, slots, false, mutate)
}

// startRealtimeWith is startRealtime; vad also registers "vad" (Silero on
// onnx, one slot).
func startRealtimeWith(t *testing.T, slots int, vad bool, mutate func(*Config)) *tserver {
	t.Helper()
	names := []string{catalogue.PocketsphinxEnUS}
	if vad {
		names = append(names, catalogue.SileroV5)
	}
	ts := startEngineServer(t, mutate, names...)
	s := ts.s
	models := []ModelEntry{{ID: "asr", Spec: ModelSpec{Engine: pocketsphinx.Name, Task: "asr",
		Checkpoint: catalogue.PocketsphinxEnUS, Slots: json.RawMessage(strconv.Itoa(slots))}}}
	if vad {
		models = append(models, ModelEntry{ID: "vad", Spec: ModelSpec{Engine: onnx.Name, Task: "vad", Checkpoint: catalogue.SileroV5, Slots: json.RawMessage("1")}})
	}
	if err := s.RegisterModels(context.Background(), models); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Runtime().StatusOf("asr"); err != nil || !st.Loaded {
		t.Fatalf("asr not loaded: %+v %v", st, err)
	}
	return ts
}

// rtClient is one test session.
type rtClient struct {
	t *testing.T
	c *websocket.Conn
}

// dialRT opens a session on model; hdr are extra header pairs. It fails
// the test unless the upgrade succeeds.
func (ts *tserver) dialRT(model string, hdr ...string) *rtClient {
	ts.t.Helper()
	return ts.dialRTWith(ts.client, model, hdr...)
}

// dialRTSmall is dialRT over a connection whose receive buffer is 4 KiB,
// so that events the client does not read block the server's writes soon.
func (ts *tserver) dialRTSmall(model string) *rtClient {
	ts.t.Helper()
	d := net.Dialer{Control: func(network, address string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }); err != nil {
			return err
		}
		return serr
	}}
	tr := &http.Transport{DialContext: d.DialContext}
	ts.t.Cleanup(tr.CloseIdleConnections)
	return ts.dialRTWith(&http.Client{Transport: tr}, model)
}

func (ts *tserver) dialRTWith(client *http.Client, model string, hdr ...string) *rtClient {
	ts.t.Helper()
	c, res, err := ts.tryDialRTWith(client, model, hdr...)
	if err != nil {
		ts.t.Fatalf("dial: %v (%v)", err, res)
	}
	rc := &rtClient{t: ts.t, c: c}
	ts.t.Cleanup(func() { _ = c.CloseNow() })
	if ev := rc.next(); ev["type"] != "transcription_session.created" {
		ts.t.Fatalf("first event %v", ev)
	}
	return rc
}

func (ts *tserver) tryDialRT(model string, hdr ...string) (*websocket.Conn, *http.Response, error) {
	return ts.tryDialRTWith(ts.client, model, hdr...)
}

func (ts *tserver) tryDialRTWith(client *http.Client, model string, hdr ...string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	for i := 0; i+1 < len(hdr); i += 2 {
		h.Set(hdr[i], hdr[i+1])
	}
	c, res, err := websocket.Dial(ctxLimit(ts.t), "ws://"+ts.addr+"/v1/realtime?intent=transcription&model="+model,
		&websocket.DialOptions{HTTPHeader: h, HTTPClient: client})
	if res != nil && res.Body != nil {
		res.Body.Close()
	}
	return c, res, err
}

// send writes a client event.
func (rc *rtClient) send(v any) {
	rc.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		rc.t.Fatal(err)
	}
	if err := rc.c.Write(ctxLimit(rc.t), websocket.MessageText, b); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// appendAudio sends samples in 20 ms appends.
func (rc *rtClient) appendAudio(samples []int16) {
	rc.t.Helper()
	if err := rc.tryAppend(samples); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// tryAppend is appendAudio for a session the server may close meanwhile:
// it stops at the first failed write.
func (rc *rtClient) tryAppend(samples []int16) error {
	n := realtime.Rate / 50
	for off := 0; off < len(samples); off += n {
		b := audio.PCM16Bytes(samples[off:min(off+n, len(samples))])
		msg, _ := json.Marshal(map[string]string{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(b)})
		if err := rc.c.Write(ctxLimit(rc.t), websocket.MessageText, msg); err != nil {
			return err
		}
	}
	return nil
}

// sync waits until the server has taken every event sent before: an
// unknown event is answered with an error in order.
func (rc *rtClient) sync() {
	rc.t.Helper()
	rc.send(map[string]string{"type": "sluice.test.sync", "event_id": "sync"})
	for {
		ev := rc.next()
		if e, ok := ev["error"].(map[string]any); ok && e["event_id"] == "sync" {
			return
		}
	}
}

// next reads one server event; a closed socket fails the test.
func (rc *rtClient) next() map[string]any {
	rc.t.Helper()
	ev, err := rc.read()
	if err != nil {
		rc.t.Fatalf("read: %v", err)
	}
	return ev
}

func (rc *rtClient) read() (map[string]any, error) {
	_, b, err := rc.c.Read(ctxLimit(rc.t))
	if err != nil {
		return nil, err
	}
	var ev map[string]any
	if err := json.Unmarshal(b, &ev); err != nil {
		rc.t.Fatalf("event %s: %v", b, err)
	}
	return ev, nil
}

// until reads events until one of type typ, returning it and the events
// before it.
func (rc *rtClient) until(typ string) (map[string]any, []map[string]any) {
	rc.t.Helper()
	var before []map[string]any
	for {
		ev := rc.next()
		if ev["type"] == typ {
			return ev, before
		}
		before = append(before, ev)
	}
}

// closed reads until the socket closes and returns its close status and
// the events read before.
func (rc *rtClient) closed() (websocket.CloseError, []map[string]any) {
	rc.t.Helper()
	var evs []map[string]any
	for {
		ev, err := rc.read()
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				rc.t.Fatalf("socket ended without a close frame: %v", err)
			}
			return ce, evs
		}
		evs = append(evs, ev)
	}
}

// TestRealtimeTranscribes: a session streams the sentence twice in 20 ms
// appends; deltas arrive before the completed event and concatenate to
// the completed transcript's words, which has the sentence's, a second turn works on the same
// session, and a client close releases the slot (CONTRACT.md
// live.transcribe).
func TestRealtimeTranscribes(t *testing.T) {
	ts := startRealtime(t, 1, nil)
	pcm := rtAudio(t)
	rc := ts.dialRT("asr")
	rc.send(map[string]any{"type": "transcription_session.update", "session": map[string]any{
		"input_audio_format": "pcm16", "input_audio_transcription": map[string]any{"model": "asr", "language": "en"}, "turn_detection": nil}})
	if ev := rc.next(); ev["type"] != "transcription_session.updated" {
		t.Fatalf("update answered %v", ev)
	}
	for turn := range 2 {
		rc.appendAudio(slices.Concat(pcm, pcm)) // two sentences: a pause inside the turn
		rc.send(map[string]string{"type": "input_audio_buffer.commit"})
		done, before := rc.until("conversation.item.input_audio_transcription.completed")
		deltas, committed := "", false
		for _, ev := range before {
			switch ev["type"] {
			case "conversation.item.input_audio_transcription.delta":
				deltas += ev["delta"].(string)
				if ev["item_id"] != done["item_id"] {
					t.Errorf("delta of item %v, completed %v", ev["item_id"], done["item_id"])
				}
			case "input_audio_buffer.committed":
				committed = ev["item_id"] == done["item_id"]
			default:
				t.Errorf("unexpected event %v", ev)
			}
		}
		text, _ := done["transcript"].(string)
		// pocketsphinx's partials carry only utterances ended at a pause,
		// so the turn's deltas are exactly its transcript's words.
		if deltas == "" || deltas != strings.Join(strings.Fields(text), " ") || !committed {
			t.Errorf("turn %d: deltas %q (want the transcript's words), committed %v before the completed %v", turn, deltas, committed, done)
		}
		for _, w := range []string{"turn", "kitchen", "lights"} {
			if !strings.Contains(text, w) {
				t.Errorf("turn %d: transcript %q lacks %q", turn, text, w)
			}
		}
	}
	if err := rc.c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	ts.awaitActive("asr", 0)
}

// awaitActive waits until model id has n active slots, through the
// runtime's records.
func (ts *tserver) awaitActive(id string, n int) {
	ts.t.Helper()
	rec := ts.records()
	for {
		st, err := ts.s.Runtime().StatusOf(id)
		if err != nil {
			ts.t.Fatal(err)
		}
		if st.ActiveSlots == n {
			return
		}
		rec.next("a release on "+id, func(*core.Record) bool { return true })
	}
}
