package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/server/internal/realtime"
)

// A session holding the only slot makes a second handshake wait in the
// FIFO and time out with 503 server_busy before any upgrade; once the
// first closes, the next handshake is admitted (CONTRACT.md
// live.admission).
func TestRealtimeAdmission(t *testing.T) {
	ts := startRealtime(t, 1, nil)
	first := ts.dialRT("asr")
	_, res, err := ts.tryDialRT("asr", AdmissionTimeoutHeader, "150")
	if err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("second handshake: %v, %+v; want 503 with Retry-After", err, res)
	}
	if err := first.c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	next := ts.dialRT("asr") // waits in the FIFO (no admission timeout) for the first's release
	next.send(map[string]string{"type": "input_audio_buffer.commit"})
	if ev := next.next(); ev["type"] != "error" {
		t.Fatalf("commit on an empty buffer: %v", ev)
	}
}

// An unload while a session is open waits for it up to the drain
// deadline; then the session commits its turn in progress (its transcript
// is still sent) and closes with 1012, the slot is released and the unload
// completes (CONTRACT.md live.drain-unload).
func TestRealtimeDrainOnUnload(t *testing.T) {
	ts := startRealtime(t, 1, func(c *Config) { c.RealtimeDrain = 100 * time.Millisecond })
	rc := ts.dialRT("asr")
	rc.appendAudio(rtAudio(t))
	rc.sync() // every append was taken before the unload
	unloaded := make(chan resp, 1)
	go func() { unloaded <- ts.do("POST", "/v1/models/asr/unload", "") }()
	ce, evs := rc.closed()
	if ce.Code != websocket.StatusServiceRestart || !strings.Contains(ce.Reason, "unloaded") {
		t.Errorf("close %v, want 1012", ce)
	}
	var text string
	for _, ev := range evs {
		if ev["type"] == "conversation.item.input_audio_transcription.completed" {
			text, _ = ev["transcript"].(string)
		}
	}
	if !strings.Contains(text, "kitchen") {
		t.Errorf("turn in progress not transcribed before the drain close: %v", evs)
	}
	if r := <-unloaded; r.status != http.StatusOK {
		t.Fatalf("unload: %d %s", r.status, r.body)
	}
}

// Shutdown closes open sessions with 1001 after their turn in progress is
// transcribed, within the shutdown timeout (CONTRACT.md live.shutdown).
func TestRealtimeShutdown(t *testing.T) {
	ts := startRealtime(t, 3, nil) // two sessions: live sessions may hold 2 of 3 slots (live.slot-share)
	a, b := ts.dialRT("asr"), ts.dialRT("asr")
	a.appendAudio(rtAudio(t))
	a.sync()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ts.s.Shutdown(ctx) }()
	for i, rc := range []*rtClient{a, b} {
		ce, evs := rc.closed()
		if ce.Code != websocket.StatusGoingAway {
			t.Errorf("session %d: close %v, want 1001", i, ce)
		}
		if i == 0 && (len(evs) == 0 || evs[len(evs)-1]["type"] != "conversation.item.input_audio_transcription.completed") {
			t.Errorf("session %d: the turn in progress was not completed before the close: %v", i, evs)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if n := ts.s.live.Count(); n != 0 {
		t.Errorf("%d sessions open after shutdown", n)
	}
}

// A client that sends but stops reading is cut at the write timeout: its
// socket is closed and its slot freed, and the next session is admitted
// (CONTRACT.md live.write-timeout).
func TestRealtimeStalledReaderCut(t *testing.T) {
	ts := startRealtime(t, 1, func(c *Config) { c.WriteTimeout = 200 * time.Millisecond })
	rc := ts.dialRTSmall("asr")
	// Every unknown event is answered with an error event naming its type
	// (32 KiB here), which this client never reads: the server's writes
	// block once the socket buffers are full.
	msg := []byte(`{"type":"` + strings.Repeat("x", 32<<10) + `"}`)
	ctx := ctxLimit(t)
	n := 0
	for ; ; n++ {
		if err := rc.c.Write(ctx, websocket.MessageText, msg); err != nil {
			break
		}
	}
	t.Logf("%d events written before the cut", n)
	if ctx.Err() != nil {
		t.Fatal("the stalled session was never cut")
	}
	ts.awaitActive("asr", 0)
	next := ts.dialRT("asr")
	next.send(map[string]string{"type": "input_audio_buffer.clear"})
	if ev := next.next(); ev["type"] != "input_audio_buffer.cleared" {
		t.Fatalf("clear: %v", ev)
	}
	if !strings.Contains(ts.logs.String(), "realtime session cut") {
		t.Error("the cut was not logged")
	}
}

// Live sessions hold at most all but one of a model's slots, so requests
// always keep one (CONTRACT.md live.slot-share): on a 2-slot model a
// second session is refused at the handshake with 503 server_busy
// live_share_exceeded while a transcription is still served; once the
// first session ends, a new one is admitted. A one-slot model admits its
// one session.
func TestRealtimeSlotShare(t *testing.T) {
	ts := startRealtime(t, 2, nil)
	a := ts.dialRT("asr")
	a.sync() // admitted: it holds its slot
	_, res, err := ts.tryDialRT("asr")
	if err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second session on 2 slots: %v, %+v; want 503", err, res)
	}
	b, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(b), "live_share_exceeded") || !strings.Contains(string(b), `"param":"model"`) {
		t.Fatalf("second session on 2 slots: %s", b)
	}
	ts.awaitActive("asr", 1) // the refusal took no slot
	ct, body := multipartUpload(t, audio.WAV(realtime.Rate, rtAudio(t)[:realtime.Rate]), "audio/wav")
	if r := ts.do("POST", "/v1/audio/transcriptions", string(body), "Content-Type", ct); r.status != http.StatusOK {
		t.Fatalf("a transcription beside the session: %d %s", r.status, r.body)
	}
	if err := a.c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	ts.awaitActive("asr", 0)
	again := ts.dialRT("asr")
	again.sync()
	one := startRealtime(t, 1, nil)
	c := one.dialRT("asr")
	c.sync()
}
