package sherpa

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// An upload too short to hold a word (1 and 10 samples, up to 0.1 s) is
// answered by every ASR family, never an error or a crash: sherpa-onnx's
// Whisper front end took the process down on 10 samples. Offline
// recognizers answer the empty transcript below 0.1 s; streaming ones
// decode what there is.
func TestShortUploadAnswered(t *testing.T) {
	root := testRoot(t)
	e := New(Config{})
	for _, name := range SyntheticNames {
		fam := families[synthetic[name].opts["family"].(string)]
		if fam.task != "asr" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			s := open(t, e, root, name, "")
			for _, n := range []int{1, 10, minOfflineSamples - 1} {
				out, err := s.Infer(context.Background(), backends.Request{Data: audio.WAV(SampleRate, make([]int16, n))}, nil)
				if err != nil {
					t.Fatalf("%d samples: %v", n, err)
				}
				var r audio.ASRResult
				if err := json.Unmarshal(out.JSON, &r); err != nil {
					t.Fatal(err)
				}
				if !fam.streaming() && (r.Text != "" || len(r.Words) != 0) {
					t.Fatalf("%d samples: %s, want the empty transcript", n, out.JSON)
				}
			}
		})
	}
}
