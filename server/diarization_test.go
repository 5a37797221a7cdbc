package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/diarize/evalset"
)

// TestDiarizationEndpoint drives POST /v1/audio/diarization on loopback
// with the real engine at two slots (diar.endpoint): a 10-second
// two-speaker recording from the evaluation-set generator comes back as
// two speakers in speaches' JSON shape and as RTTM lines named after the
// upload; two concurrent requests answer byte-identically; a model of
// another task is 400 wrong_task (err.wrong-task). A missing engine
// library or model source fails the test (make deps).
func TestDiarizationEndpoint(t *testing.T) {
	ctx := context.Background()
	g, err := evalset.NewGenerator(ctx)
	if err != nil {
		t.Fatalf("flite (make deps): %v", err)
	}
	recs, err := g.Generate(ctx, evalset.Spec{Name: "srv", Speakers: 2, Recordings: 1, Seconds: 10, Seed: 31})
	g.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wav := recs[0].WAV()
	ts := startEngineServer(t, nil, catalogue.DiarizeSilero, catalogue.SileroV5)
	s, client := ts.s, ts.client
	two := json.RawMessage("2")
	if err := s.RegisterModels(ctx, []ModelEntry{
		{ID: "diar", Spec: ModelSpec{Engine: "diarize", Task: "diarization", Checkpoint: catalogue.DiarizeSilero, Slots: two}},
		{ID: "vad", Spec: ModelSpec{Engine: "onnx", Task: "vad", Checkpoint: catalogue.SileroV5, Slots: json.RawMessage("1")}},
	}); err != nil {
		t.Fatal(err)
	}
	url := ts.url + "/v1/audio/diarization"
	post := func(fields ...string) (int, string, []byte) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("file", "two speakers.wav")
		_, _ = fw.Write(wav)
		for i := 0; i+1 < len(fields); i += 2 {
			_ = mw.WriteField(fields[i], fields[i+1])
		}
		_ = mw.Close()
		resp, err := client.Post(url, mw.FormDataContentType(), &buf)
		if err != nil {
			t.Error(err)
			return 0, "", nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), b
	}
	code, ct, body := post("model", "diar")
	var res audio.DiarizationResult
	if code != 200 || ct != "application/json" || json.Unmarshal(body, &res) != nil {
		t.Fatalf("json: %d %s %s", code, ct, body)
	}
	found := map[string]bool{}
	for _, seg := range res.Segments {
		found[seg.Speaker] = true
		if seg.End <= seg.Start || seg.End > res.Duration {
			t.Fatalf("bad segment %+v", seg)
		}
	}
	if len(found) != 2 || !found["SPEAKER_00"] || !found["SPEAKER_01"] {
		t.Fatalf("speakers %v in %s", found, body)
	}
	// matched output at 2 slots, over HTTP: two at once answer the same bytes.
	answers := make(chan []byte, 2)
	for range 2 {
		go func() {
			_, _, b := post("model", "diar", "response_format", "json")
			answers <- b
		}()
	}
	if a, b := <-answers, <-answers; !bytes.Equal(a, body) || !bytes.Equal(b, body) {
		t.Fatalf("concurrent answers differ:\n%s\n%s\n%s", body, a, b)
	}
	code, ct, rttm := post("model", "diar", "response_format", "rttm", "min_speakers", "1", "max_speakers", "4")
	lines := strings.Split(strings.TrimSuffix(string(rttm), "\n"), "\n")
	if code != 200 || !strings.HasPrefix(ct, "text/plain") || len(lines) != len(res.Segments) || !strings.HasPrefix(lines[0], "SPEAKER two_speakers 1 ") {
		t.Fatalf("rttm: %d %s %q", code, ct, rttm)
	}
	code, _, body = post("model", "diar", "num_speakers", "3")
	if code != 200 || json.Unmarshal(body, &res) != nil || !strings.Contains(string(body), "SPEAKER_02") {
		t.Fatalf("num_speakers=3: %d %s", code, body)
	}
	code, _, body = post("model", "vad")
	if code != 400 || !strings.Contains(string(body), "wrong_task") {
		t.Fatalf("vad model: %d %s", code, body)
	}
}
