package server

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/whisper"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

// A 10-sample upload to /v1/audio/transcriptions is a 200 with the empty
// transcript for every ASR engine of the default root and whisper, never a
// 500 logged at ERROR (whisper's language detection failed on it).
func TestShortUploadTranscribed(t *testing.T) {
	if err := whisper.Available(); err != nil {
		t.Fatalf("whisper library missing: %v (run make deps)", err)
	}
	cfg := testConfig(t)
	if err := engines.BuildDefaultRoot(cfg.ModelsRoot, "", catalogue.PocketsphinxEnUS); err != nil {
		t.Fatal(err)
	}
	r, err := whisper.Recipe("whisper-tiny", synth.Tiny, whisper.Seed, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := catalogue.Build(cfg.ModelsRoot, []catalogue.Recipe{r}); err != nil {
		t.Fatal(err)
	}
	ts := newServerOpts(t, cfg, Options{Engines: engines.Registry(engines.Config{})}).serve()
	ts.put("ps", `{"engine":"pocketsphinx","task":"asr","checkpoint":"pocketsphinx-en-us","slots":1}`)
	ts.put("wh", `{"engine":"whisper","task":"asr","checkpoint":"whisper-tiny","slots":1}`)
	wav := string(audio.WAV(16000, make([]int16, 10)))
	for _, m := range []string{"ps", "wh"} {
		for _, format := range []string{"json", "verbose_json", "text"} {
			res := ts.do("POST", "/v1/audio/transcriptions?model="+m+"&response_format="+format, wav, "Content-Type", "audio/wav")
			if res.status != 200 || (format == "json" && strings.TrimSpace(string(res.body)) != `{"text":""}`) {
				t.Fatalf("%s %s: %d %s", m, format, res.status, res.body)
			}
		}
	}
	if logs := ts.logs.String(); strings.Contains(logs, "level=ERROR") {
		t.Fatalf("logged at ERROR:\n%s", logs)
	}
}
