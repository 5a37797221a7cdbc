package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
)

// sluice run as README shows it: plain text to a tts model is the text to
// speak; an asr model takes its audio from --audio; an audio model without
// it is a usage error that says so, not a Go decoding error.
func TestRunTextAndAudio(t *testing.T) {
	root := t.TempDir()
	if err := engines.BuildDefaultRoot(root, "", catalogue.FliteSLT, catalogue.PocketsphinxEnUS); err != nil {
		t.Fatal(err)
	}
	wav := filepath.Join(t.TempDir(), "door.wav")
	var out, errs bytes.Buffer
	if err := run(context.Background(), []string{"--models-root", root, "--out", wav, "tts", "Open the garage door."}, &out, &errs); err != nil {
		t.Fatal(err, errs.String())
	}
	if !strings.Contains(errs.String(), "to "+wav) {
		t.Fatalf("stderr: %s", errs.String())
	}
	for _, args := range [][]string{
		{"--models-root", root, "--audio", wav, "asr"},
		{"--models-root", root, "--audio", wav, "asr", `{"language":"en"}`},
	} {
		out.Reset()
		if err := run(context.Background(), args, &out, &errs); err != nil {
			t.Fatal(args, err)
		}
		var r audio.ASRResult
		if err := json.Unmarshal(out.Bytes(), &r); err != nil || !strings.Contains(strings.ToLower(r.Text), "door") {
			t.Fatalf("%v: %s %v", args, out.String(), err)
		}
	}
	err := run(context.Background(), []string{"--models-root", root, "asr", "hello"}, &out, &errs)
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--audio FILE") {
		t.Fatalf("asr without audio: %v", err)
	}
	if got := string(runInput("tts", "hi")); got != `{"text":"hi"}` {
		t.Fatal(got)
	}
	if got := string(runInput("tts", `"hi"`)); got != `{"text":"hi"}` {
		t.Fatal(got)
	}
	if got := string(runInput("tts", `{"text":"hi","voice":"slt"}`)); got != `{"text":"hi","voice":"slt"}` {
		t.Fatal(got)
	}
}
