package engines

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

func TestScanDefaultRoot(t *testing.T) {
	cat, _ := scan(t)
	for _, n := range catalogue.DefaultNames {
		if _, ok := cat.Get(n); !ok {
			t.Fatalf("checkpoints %v lack %s", cat.Names(), n)
		}
	}
	cp, _ := cat.Get(catalogue.EspeakEn)
	if cp.Parallel.MaxSlots != 1 {
		t.Fatalf("espeak admits %d slots", cp.Parallel.MaxSlots)
	}
}

// TestRoundTrip: flite speaks short commands and pocketsphinx's transcript
// contains their words.
func TestRoundTrip(t *testing.T) {
	cat, reg := scan(t)
	ctx := context.Background()
	tts, _ := cat.Get(catalogue.FliteSLT)
	asr, _ := cat.Get(catalogue.PocketsphinxEnUS)
	ttsPool, err := OpenPool(ctx, reg[tts.Engine], SpecFor("tts", tts, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer ttsPool.Close(ctx)
	asrPool, err := OpenPool(ctx, reg[asr.Engine], SpecFor("asr", asr, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer asrPool.Close(ctx)
	words, heard := 0, 0
	for _, c := range []string{"Turn on the kitchen lights.", "Open the garage door.", "Play some music."} {
		in, _ := json.Marshal(audio.TTSRequest{Text: c})
		speech, err := ttsPool.Sessions[0].Infer(ctx, backends.Request{Input: in}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := asrPool.Sessions[0].Infer(ctx, backends.Request{Data: speech.Data}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var r audio.ASRResult
		if err := json.Unmarshal(out.JSON, &r); err != nil {
			t.Fatal(err)
		}
		t.Logf("%q -> %q", c, r.Text)
		for _, w := range strings.Fields(strings.ToLower(strings.Trim(c, "."))) {
			words++
			if strings.Contains(" "+r.Text+" ", " "+w+" ") {
				heard++
			}
		}
	}
	if heard < words*8/10 {
		t.Fatalf("heard %d of %d words", heard, words)
	}
}

// TestMatchedOutputAtTwoSlots is the contract's matched-output check in the
// default test run: for every checkpoint, a 2-slot pool with two
// concurrent clients answers like the capacity-1 pool, byte for byte; the
// one-slot espeak refuses 2 slots instead.
func TestMatchedOutputAtTwoSlots(t *testing.T) {
	cat, reg := scan(t)
	in := standardInputs(t)
	ctx := context.Background()
	for _, name := range cat.Names() {
		cp, _ := cat.Get(name)
		reqs := in[cp.Task]
		if cp.Task == "asr" {
			reqs = reqs[:len(Commands)] // the 11 s jfk.wav is left to validate-engines, to keep this test short
		}
		rows, err := Matched(ctx, reg[cp.Engine], SpecFor(name, cp, 1), name, reqs, []int{2}, 1)
		if err != nil {
			t.Fatal(err)
		}
		r := rows[0]
		t.Logf("%s slots=%d matched %d/%d %s (%s)", name, r.Slots, r.Matched, r.Requests, r.Status(), ids(reqs))
		switch {
		case cp.Parallel.MaxSlots < 2:
			if !errors.Is(r.Refused, backends.ErrInvalid) {
				t.Errorf("%s: 2 slots not refused: %+v", name, r)
			}
		case r.Status() != "ok":
			t.Errorf("%s: %s: %d/%d matched, err %v, refused %v", name, r.Status(), r.Matched, r.Requests, r.Err, r.Refused)
		}
	}
}

// TestCorruptRootFailsWhole: a root with one damaged model file fails the
// scan as a whole (no partial catalogue), naming the file.
func TestCorruptRootFailsWhole(t *testing.T) {
	modelsRoot(t)
	recipes, err := catalogue.Defaults(catalogue.DefaultSources(""))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var pick []catalogue.Recipe
	for _, r := range recipes {
		if r.Manifest.Name == catalogue.FliteSLT || r.Manifest.Name == catalogue.SileroV5 {
			pick = append(pick, r)
		}
	}
	if _, err := catalogue.Build(root, pick); err != nil {
		t.Fatal(err)
	}
	reg := Registry(Config{})
	if _, err := ScanRoot(root, reg); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, catalogue.SileroV5, "silero_vad_v5.onnx")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, b[:len(b)/2], 0o644)
	cat, err := ScanRoot(root, reg)
	if cat != nil || !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "silero_vad_v5.onnx") {
		t.Fatalf("corrupt root: catalogue %v, err %v", cat, err)
	}
}
