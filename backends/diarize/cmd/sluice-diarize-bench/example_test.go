package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends/audio"
)

// The README's diarization example file: a WAV of about 30 s and an RTTM
// reference with two speakers.
func TestWriteExample(t *testing.T) {
	p := filepath.Join(t.TempDir(), "meeting.wav")
	if err := writeExample(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	a, err := audio.ParseWAV(b)
	if err != nil || a.Seconds() < 30 || a.Seconds() > 60 {
		t.Fatalf("%v, %.1f s", err, a.Seconds())
	}
	ref, err := os.ReadFile(strings.TrimSuffix(p, ".wav") + ".rttm")
	if err != nil {
		t.Fatal(err)
	}
	speakers := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(ref)), "\n") {
		if f := strings.Fields(line); len(f) >= 8 && f[0] == "SPEAKER" {
			speakers[f[7]] = true
		}
	}
	if len(speakers) != 2 {
		t.Fatalf("speakers %v in\n%s", speakers, ref)
	}
}
