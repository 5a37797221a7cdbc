package sherpa

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

// BenchmarkCancel (make bench-sherpa; sherpa.cancel): for each family,
// the longest span of one request in which a cancel cannot take effect
// (uninterrupted-ms: between two points where the binding checks the
// context, through the test hook): for TTS one sentence's synthesis (the
// progress callback's interval), for a streaming recognizer one chunk's
// decode, for an offline recognizer or a diarization the library's one
// call on the benchmark request (jfk.wav, 11 s; it grows with the audio,
// up to max_seconds). A cancel lands within that span of the context's
// end.
func BenchmarkCancel(b *testing.B) {
	root := testRoot(b)
	e := New(Config{})
	b.Cleanup(func() { testHook = nil })
	for _, name := range benchNames {
		req := benchRequest(b, name)
		fam := families[synthetic[name].opts["family"].(string)]
		b.Run(name, func(b *testing.B) {
			cp, err := catalogue.Load(Dir(root, name))
			if err != nil {
				b.Fatal(err)
			}
			spec := backends.Spec{Model: name, Task: cp.Task, Engine: Name, Checkpoint: cp.Dir, Options: []byte(`{}`), Slots: 1}
			s, _, err := e.Open(context.Background(), spec)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(context.Background())
			var mu sync.Mutex
			var last time.Time
			var worst time.Duration
			mark := func() {
				now := time.Now()
				if d := now.Sub(last); !last.IsZero() && d > worst {
					worst = d
				}
				last = now
			}
			testHook = func(point string) {
				mu.Lock()
				defer mu.Unlock()
				switch point {
				case "online-decoded":
					mark()
					last = time.Time{}
				case "online-decode", "tts-piece", "offline-decode", "diarize":
					if point == "online-decode" {
						last = time.Time{}
					}
					mark()
				}
			}
			defer func() { testHook = nil }()
			b.ResetTimer()
			for range b.N {
				mu.Lock()
				last = time.Time{}
				if fam.task == "tts" {
					last = time.Now() // from the call to the first sentence
				}
				mu.Unlock()
				if _, err := s.Infer(context.Background(), req, nil); err != nil {
					b.Fatal(err)
				}
				mu.Lock()
				if fam.task != "tts" && !fam.streaming() {
					mark() // the offline call ends with the request
				}
				mu.Unlock()
			}
			b.StopTimer()
			b.ReportMetric(float64(worst.Microseconds())/1000, "uninterrupted-ms")
		})
	}
}
