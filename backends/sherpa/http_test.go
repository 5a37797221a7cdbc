package sherpa_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/sherpa"
	"github.com/sluice-dev/sluice/server"
)

// TestHTTP drives the synthetic checkpoints through the server's OpenAI
// routes: /v1/audio/speech (WAV, and stream_format sse whose deltas are
// the same audio), /v1/audio/voices (the multi-speaker voice's speakers),
// /v1/audio/transcriptions (NeMo CTC with word timestamps); a broken
// checkpoint is refused at registration while the loaded models serve.
func TestHTTP(t *testing.T) {
	sherpa.TestRoot(t) // skips or fails when the library or the generator is missing
	root := t.TempDir()
	src := catalogue.DefaultSources("")
	var recipes []catalogue.Recipe
	for _, n := range sherpa.SyntheticNames {
		r, err := sherpa.SyntheticRecipe(src, n, 4)
		if err != nil {
			t.Fatal(err)
		}
		recipes = append(recipes, r)
	}
	broken, err := sherpa.SyntheticRecipe(src, sherpa.PiperSynthetic, 4)
	if err != nil {
		t.Fatal(err)
	}
	broken.Manifest.Name = "sherpa-broken"
	for i, f := range broken.Files {
		if f.Dest == "tokens.txt" {
			broken.Files[i].Content = []byte(strings.Replace(string(f.Content), "^ 1\n", "", 1))
		}
	}
	if _, err := catalogue.Build(root, append(recipes, broken)); err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.ParallelJobs, cfg.ModelsRoot = true, root
	cfg.RealtimeMaxRate = 0 // the test sends 22 s of audio at once
	s, err := server.New(cfg, server.Options{Engines: engines.Registry(engines.Config{}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	client := &http.Client{Transport: &http.Transport{}}
	defer func() {
		client.CloseIdleConnections()
		if err := s.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	base := "http://" + ln.Addr().String()
	two, over := json.RawMessage("2"), json.RawMessage(`{"oversubscribe":true}`)
	if err := s.RegisterModels(context.Background(), []server.ModelEntry{
		{ID: "piper", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "tts", Checkpoint: sherpa.PiperSynthetic, Slots: two, Options: over}},
		{ID: "piper-multi", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "tts", Checkpoint: sherpa.PiperMultiSynthetic, Slots: two, Options: over}},
		{ID: "ctc", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "asr", Checkpoint: sherpa.NemoCTCSynthetic, Slots: two, Options: over}},
		{ID: "stream", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "asr", Checkpoint: sherpa.StreamingSynthetic, Slots: two, Options: over}},
		{ID: "kokoro", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "tts", Checkpoint: sherpa.KokoroSynthetic, Slots: two, Options: over}},
		{ID: "zipformer", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "asr", Checkpoint: sherpa.TransducerSynthetic, Slots: two, Options: over}},
		{ID: "sense-voice", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "asr", Checkpoint: sherpa.SenseVoiceSynthetic, Slots: two, Options: over}},
		{ID: "nemo-stream", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "asr", Checkpoint: sherpa.OnlineNemoCTCSynthetic, Slots: two, Options: over}},
		{ID: "paraformer-stream", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "asr", Checkpoint: sherpa.OnlineParaformerSynthetic, Slots: two, Options: over}},
		{ID: "kokoro-multi", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "tts", Checkpoint: sherpa.KokoroMultiSynthetic, Slots: two, Options: over}},
		{ID: "moonshine-v2", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "asr", Checkpoint: sherpa.MoonshineV2Synthetic, Slots: two, Options: over}},
		{ID: "matcha-vocos", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "tts", Checkpoint: sherpa.MatchaVocosSynthetic, Slots: two, Options: over}},
		{ID: "zipformer-beam", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "asr", Checkpoint: sherpa.TransducerSynthetic, Slots: two, Options: json.RawMessage(`{"oversubscribe":true,"decoding_method":"modified_beam_search"}`)}},
		{ID: "zipformer-bpe", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "asr", Checkpoint: sherpa.TransducerBPESynthetic, Slots: two, Options: json.RawMessage(`{"oversubscribe":true,"decoding_method":"modified_beam_search"}`)}},
		{ID: "kitten", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "tts", Checkpoint: sherpa.KittenSynthetic, Slots: two, Options: over}},
		{ID: "matcha", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "tts", Checkpoint: sherpa.MatchaSynthetic, Slots: two, Options: over}},
		{ID: "whisper", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "asr", Checkpoint: sherpa.WhisperSynthetic, Slots: two, Options: over}},
		{ID: "moonshine", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "asr", Checkpoint: sherpa.MoonshineSynthetic, Slots: two, Options: over}},
		{ID: "canary", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "asr", Checkpoint: sherpa.CanarySynthetic, Slots: two, Options: over}},
		{ID: "diarize", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "diarization", Checkpoint: sherpa.DiarizationSynthetic, Slots: two, Options: over}},
		{ID: "parakeet", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "asr", Checkpoint: sherpa.ParakeetSynthetic, Slots: two, Options: over}},
		{ID: "paraformer", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "asr", Checkpoint: sherpa.ParaformerSynthetic, Slots: two, Options: over}},
	}); err != nil {
		t.Fatal(err)
	}
	post := func(path string, body any) (int, http.Header, []byte) {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := client.Post(base+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, out
	}
	code, h, wav := post("/v1/audio/speech", map[string]any{"model": "piper", "input": "Hello from Piper. Second sentence."})
	a, err := audio.ParseWAV(wav)
	if code != 200 || h.Get("Content-Type") != "audio/wav" || err != nil || a.Rate != 22050 || len(a.Samples) == 0 {
		t.Fatalf("speech: %d %s %v rate %d", code, h.Get("Content-Type"), err, a.Rate)
	}
	code, _, sse := post("/v1/audio/speech", map[string]any{"model": "piper", "input": "Hello from Piper. Second sentence.", "stream_format": "sse", "response_format": "pcm", "sample_rate": 22050})
	var pcm []byte
	deltas := 0
	sc := bufio.NewScanner(bytes.NewReader(sse))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct{ Type, Audio string }
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "speech.audio.delta" {
			b, err := decodeB64(ev.Audio)
			if err != nil {
				t.Fatal(err)
			}
			pcm = append(pcm, b...)
			deltas++
		}
	}
	if code != 200 || deltas != 2 || !bytes.Equal(pcm, audio.PCM16Bytes(a.Samples)) {
		t.Fatalf("sse: %d, %d deltas, %d bytes of PCM, want 2 deltas and the WAV's %d bytes", code, deltas, len(pcm), 2*len(a.Samples))
	}
	resp, err := client.Get(base + "/v1/audio/voices?model=piper-multi")
	if err != nil {
		t.Fatal(err)
	}
	vb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var vl struct {
		Data []struct {
			Voices []struct{ ID string }
		}
	}
	if json.Unmarshal(vb, &vl) != nil || len(vl.Data) != 1 || len(vl.Data[0].Voices) != 3 || vl.Data[0].Voices[2].ID != "cleo" {
		t.Fatalf("voices: %s", vb)
	}
	if code, _, b := post("/v1/audio/speech", map[string]any{"model": "piper-multi", "input": "Hi.", "voice": "cleo"}); code != 200 {
		t.Fatalf("voice cleo: %d %s", code, b)
	}
	if code, _, b := post("/v1/audio/speech", map[string]any{"model": "piper-multi", "input": "Hi.", "voice": "zed"}); code != 400 || !strings.Contains(string(b), "zed") {
		t.Fatalf("unknown voice: %d %s", code, b)
	}

	jfk, err := os.ReadFile(src.JFK())
	if err != nil {
		t.Fatal(err)
	}
	transcribe := func(fields ...string) (int, []byte) {
		t.Helper()
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("file", "jfk.wav")
		_, _ = fw.Write(jfk)
		for i := 0; i+1 < len(fields); i += 2 {
			_ = mw.WriteField(fields[i], fields[i+1])
		}
		_ = mw.Close()
		resp, err := client.Post(base+"/v1/audio/transcriptions", mw.FormDataContentType(), &buf)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, body := transcribe("model", "ctc", "response_format", "verbose_json", "timestamp_granularities[]", "word")
	var v struct {
		Text     string
		Duration float64
		Words    []struct {
			Word       string
			Start, End float64
		}
	}
	if code != 200 || json.Unmarshal(body, &v) != nil || v.Text == "" || len(v.Words) < 10 || v.Duration != 11 {
		t.Fatalf("transcription: %d %s", code, body)
	}
	if code, b := transcribe("model", "ctc", "response_format", "srt"); code != 200 || !strings.HasPrefix(string(b), "1\n00:00:00,") {
		t.Fatalf("srt: %d %q", code, b)
	}
	// Every other recognizer answers through the route; those with token
	// times give words.
	for _, id := range []string{"zipformer", "parakeet", "sense-voice", "paraformer", "whisper", "moonshine", "moonshine-v2", "canary", "stream", "nemo-stream", "paraformer-stream"} {
		code, body := transcribe("model", id, "response_format", "verbose_json", "timestamp_granularities[]", "word")
		var r struct {
			Text     string
			Language string
			Words    []struct{ Word string }
		}
		if code != 200 || json.Unmarshal(body, &r) != nil || r.Text == "" || r.Language == "" {
			t.Fatalf("%s: %d %s", id, code, body)
		}
		if (id == "zipformer" || id == "parakeet" || id == "sense-voice" || id == "paraformer") && len(r.Words) < 10 {
			t.Fatalf("%s: %d words", id, len(r.Words))
		}
	}
	// stream=true on the streaming families: transcript.text.delta events
	// (the endpointed segments; jfk.wav is one) that join to the
	// transcript.text.done text, which is the unstreamed transcript.
	for _, id := range []string{"stream", "nemo-stream", "paraformer-stream"} {
		_, plain := transcribe("model", id, "response_format", "text")
		code, body := transcribe("model", id, "stream", "true")
		var deltas strings.Builder
		done, n := "", 0
		for _, line := range strings.Split(string(body), "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			var ev struct{ Type, Delta, Text string }
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("%s: event %q: %v", id, data, err)
			}
			switch ev.Type {
			case "transcript.text.delta":
				deltas.WriteString(ev.Delta)
				n++
			case "transcript.text.done":
				done = ev.Text
			}
		}
		if code != 200 || n == 0 || done == "" || deltas.String() != done || done != strings.TrimSpace(string(plain)) {
			t.Fatalf("%s streamed: %d, %d deltas joining to %q, done %q, unstreamed %q", id, code, n, deltas.String(), done, plain)
		}
	}
	param := func(b []byte) string {
		var e struct{ Error struct{ Param string } }
		_ = json.Unmarshal(b, &e)
		return e.Error.Param
	}
	// A language the model declares is served (a recognizer of the
	// slot's for it, langs.go); one it does not is refused naming it.
	if code, b := transcribe("model", "sense-voice", "language", "ja", "response_format", "verbose_json"); code != 200 || !strings.Contains(string(b), `"language":"ja"`) {
		t.Fatalf("sense-voice in Japanese: %d %s", code, b)
	}
	if code, b := transcribe("model", "sense-voice", "language", "fr"); code != 400 || param(b) != "language" {
		t.Fatalf("sense-voice in French: %d %s", code, b)
	}
	// hotwords (an extension field): taken by a transducer with
	// modified_beam_search, refused naming it by the others.
	if code, b := transcribe("model", "zipformer-beam", "hotwords", "l :30/j"); code != 200 || !strings.Contains(string(b), "l") {
		t.Fatalf("hotwords on zipformer-beam: %d %s", code, b)
	}
	// A BPE transducer spells hotwords with its word pieces (bpe.vocab).
	if code, b := transcribe("model", "zipformer-bpe", "hotwords", "one :30/the quiz"); code != 200 {
		t.Fatalf("hotwords on zipformer-bpe: %d %s", code, b)
	}
	if code, b := transcribe("model", "zipformer-bpe", "hotwords", "caf\u00e9"); code != 400 || param(b) != "hotwords" {
		t.Fatalf("an unspellable hotword on zipformer-bpe: %d %s", code, b)
	}
	for _, id := range []string{"zipformer", "ctc"} {
		if code, b := transcribe("model", id, "hotwords", "l"); code != 400 || param(b) != "hotwords" {
			t.Fatalf("hotwords on %s: %d %s", id, code, b)
		}
	}
	code, h, kw := post("/v1/audio/speech", map[string]any{"model": "kokoro", "input": "Hello from Kokoro.", "voice": "am_synth", "sample_rate": 16000})
	if ka, err := audio.ParseWAV(kw); code != 200 || h.Get("Content-Type") != "audio/wav" || err != nil || ka.Rate != 16000 || len(ka.Samples) == 0 {
		t.Fatalf("kokoro: %d %s %v", code, h.Get("Content-Type"), err)
	}
	code, _, mw := post("/v1/audio/speech", map[string]any{"model": "matcha", "input": "Hello from Matcha.", "response_format": "flac"})
	if code != 200 || len(mw) < 100 || string(mw[:4]) != "fLaC" {
		t.Fatalf("matcha: %d, %d bytes", code, len(mw))
	}
	resp, err = client.Get(base + "/v1/audio/voices?model=kokoro")
	if err != nil {
		t.Fatal(err)
	}
	vb, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(vb), `"af_synth"`) || !strings.Contains(string(vb), `"am_synth"`) {
		t.Fatalf("kokoro voices: %s", vb)
	}
	err = s.RegisterModels(context.Background(), []server.ModelEntry{
		{ID: "broken", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "tts", Checkpoint: "sherpa-broken", Slots: json.RawMessage("1")}},
	})
	if err == nil || !strings.Contains(err.Error(), `no "^"`) {
		t.Fatalf("broken checkpoint: %v, want an error naming the missing token", err)
	}
	if code, b := transcribe("model", "ctc"); code != 200 || !strings.Contains(string(b), v.Text) {
		t.Fatalf("after the broken checkpoint: %d %s", code, b)
	}
	diarize := func(fields ...string) (int, []byte) {
		t.Helper()
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("file", "jfk.wav")
		_, _ = fw.Write(jfk)
		for i := 0; i+1 < len(fields); i += 2 {
			_ = mw.WriteField(fields[i], fields[i+1])
		}
		_ = mw.Close()
		resp, err := client.Post(base+"/v1/audio/diarization", mw.FormDataContentType(), &buf)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, body = diarize("model", "diarize", "num_speakers", "2")
	var dr audio.DiarizationResult
	if code != 200 || json.Unmarshal(body, &dr) != nil || len(dr.Segments) < 2 || dr.Duration != 11 {
		t.Fatalf("diarization: %d %s", code, body)
	}
	if code, b := diarize("model", "diarize", "response_format", "rttm"); code != 200 || !strings.HasPrefix(string(b), "SPEAKER ") {
		t.Fatalf("rttm: %d %q", code, b)
	}
	// Known speakers (OpenAI's field names): the reference of the second
	// found speaker, as a data URL, names it.
	ja, err := audio.ParseWAV(jfk)
	if err != nil {
		t.Fatal(err)
	}
	var ref []int16
	for _, sg := range dr.Segments {
		if sg.Speaker == "SPEAKER_01" {
			ref = append(ref, ja.Samples[int(sg.Start*16000):int(sg.End*16000)]...)
		}
	}
	url := "data:audio/wav;base64," + base64.StdEncoding.EncodeToString(audio.WAV(16000, ref))
	code, body = diarize("model", "diarize", "num_speakers", "2", "known_speaker_names[]", "alice", "known_speaker_references[]", url)
	var kr audio.DiarizationResult
	if code != 200 || json.Unmarshal(body, &kr) != nil || len(kr.Segments) != len(dr.Segments) {
		t.Fatalf("known speakers: %d %s", code, body)
	}
	for i, sg := range kr.Segments {
		if (sg.Speaker == "alice") != (dr.Segments[i].Speaker == "SPEAKER_01") {
			t.Fatalf("known speakers: segment %d is %s, was %s", i, sg.Speaker, dr.Segments[i].Speaker)
		}
	}
	if code, b := diarize("model", "diarize", "known_speaker_names[]", "alice"); code != 400 || !strings.Contains(string(b), "pairs") {
		t.Fatalf("a name without a reference: %d %s", code, b)
	}
	// The speaker-embedding route: the reference's embedding is most like
	// itself; an unknown field is a 400 naming it.
	embed := func(wavBytes []byte, fields ...string) (int, []byte) {
		t.Helper()
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("file", "ref.wav")
		_, _ = fw.Write(wavBytes)
		for i := 0; i+1 < len(fields); i += 2 {
			_ = mw.WriteField(fields[i], fields[i+1])
		}
		_ = mw.Close()
		resp, err := client.Post(base+"/v1/audio/speech/embedding", mw.FormDataContentType(), &buf)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	var e1, e2 struct {
		Model     string
		Dim       int
		Embedding []float32
	}
	c1, b1 := embed(audio.WAV(16000, ref), "model", "diarize")
	c2, b2 := embed(audio.WAV(16000, ja.Samples[:16000*3]), "model", "diarize")
	if c1 != 200 || c2 != 200 || json.Unmarshal(b1, &e1) != nil || json.Unmarshal(b2, &e2) != nil || e1.Dim != 32 || len(e2.Embedding) != 32 || e1.Model != "diarize" {
		t.Fatalf("embedding: %d %s / %d %s", c1, b1, c2, b2)
	}
	if code, b := embed(audio.WAV(16000, ref), "model", "diarize", "num_speakers", "2"); code != 400 || !strings.Contains(string(b), "num_speakers") {
		t.Fatalf("embedding with num_speakers: %d %s", code, b)
	}
	if code, b := embed(audio.WAV(16000, ref), "model", "ctc"); code != 400 {
		t.Fatalf("embedding on an asr model: %d %s", code, b)
	}
	realtime(t, client, ln.Addr().String(), jfk, func(fields ...string) (int, []byte) {
		a, err := audio.ParseWAV(jfk)
		if err != nil {
			t.Fatal(err)
		}
		jfk = audio.WAV(24000, a.To(24000).Samples) // the same audio the session sends
		return transcribe(fields...)
	})
}

// realtime streams jfk.wav at 24 kHz in 20 ms appends into a live
// transcription session on the streaming model, twice: the deltas of each
// turn arrive before its completed event and concatenate to its
// transcript's words (stable words as they settle, then a last delta with
// the rest: CONTRACT.md live.transcribe), and the transcript equals the
// file route's.
func realtime(t *testing.T, client *http.Client, addr string, jfk []byte, transcribe func(...string) (int, []byte)) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/v1/realtime?intent=transcription&model=stream", &websocket.DialOptions{HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 22)
	send := func(v any) {
		b, _ := json.Marshal(v)
		if err := c.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	next := func() map[string]any {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	if ev := next(); ev["type"] != "transcription_session.created" {
		t.Fatalf("first event %v", ev)
	}
	send(map[string]any{"type": "transcription_session.update", "session": map[string]any{
		"input_audio_format": "pcm16", "input_audio_transcription": map[string]any{"model": "stream"}, "turn_detection": nil}})
	if ev := next(); ev["type"] != "transcription_session.updated" {
		t.Fatalf("update answered %v", ev)
	}
	a, err := audio.ParseWAV(jfk)
	if err != nil {
		t.Fatal(err)
	}
	pcm := a.To(24000).Samples
	_, fb := transcribe("model", "stream", "response_format", "text")
	want := strings.TrimSpace(string(fb))
	for turn := range 2 {
		for off := 0; off < len(pcm); off += 480 {
			b := audio.PCM16Bytes(pcm[off:min(off+480, len(pcm))])
			send(map[string]string{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(b)})
		}
		send(map[string]string{"type": "input_audio_buffer.commit"})
		deltas, n := "", 0
		for {
			ev := next()
			if ev["type"] == "conversation.item.input_audio_transcription.delta" {
				deltas += ev["delta"].(string)
				n++
				continue
			}
			if ev["type"] != "conversation.item.input_audio_transcription.completed" {
				continue
			}
			text, _ := ev["transcript"].(string)
			if n < 3 || deltas != strings.Join(strings.Fields(text), " ") || text != want {
				t.Fatalf("turn %d: %d deltas %q, transcript %q, file route %q", turn, n, deltas, text, want)
			}
			t.Logf("turn %d: %d deltas said %d of the transcript's %d bytes", turn, n, len(deltas), len(text))
			break
		}
	}
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
}

func decodeB64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
