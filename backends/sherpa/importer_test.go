package sherpa

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/backends/catalogue"
)

// TestImportDetectsFamilies: each synthetic checkpoint, its manifest
// removed and its files renamed as sherpa-onnx's release archives name
// them, is imported back to the same family and options naming the
// files, and the engine validates the result.
func TestImportDetectsFamilies(t *testing.T) {
	root := testRoot(t)
	e := New(Config{})
	renames := map[string]map[string]string{
		PiperSynthetic:            {"model.onnx": "en_US-synthetic-low.onnx"},
		NemoCTCSynthetic:          {},
		KokoroSynthetic:           {},
		KittenSynthetic:           {},
		MatchaVocosSynthetic:      {},
		MoonshineV2Synthetic:      {},
		KokoroMultiSynthetic:      {},
		OnlineNemoCTCSynthetic:    {},
		OnlineParaformerSynthetic: {},
		ParaformerSynthetic:       {},
		MatchaSynthetic:           {},
		MoonshineSynthetic:        {},
		CanarySynthetic:           {},
		DiarizationSynthetic:      {"segmentation.onnx": "model.onnx", "embedding.onnx": "3dspeaker_speech_eres2net_base_sv_zh-cn_3dspeaker_16k.onnx"},
		WhisperSynthetic:          {"tiny.en-encoder.onnx": "base.en-encoder.int8.onnx", "tiny.en-decoder.onnx": "base.en-decoder.int8.onnx", "tiny.en-tokens.txt": "base.en-tokens.txt"},
		SenseVoiceSynthetic:       {"model.onnx": "model.int8.onnx"},
		TransducerSynthetic:       {"encoder.onnx": "encoder-epoch-99-avg-1.onnx", "decoder.onnx": "decoder-epoch-99-avg-1.onnx", "joiner.onnx": "joiner-epoch-99-avg-1.onnx"},
		TransducerBPESynthetic:    {"encoder.onnx": "encoder-epoch-99-avg-1.int8.onnx", "decoder.onnx": "decoder-epoch-99-avg-1.onnx", "joiner.onnx": "joiner-epoch-99-avg-1.int8.onnx"},
		StreamingSynthetic:        {"encoder.onnx": "encoder-epoch-99-avg-1-chunk-16-left-128.int8.onnx", "decoder.onnx": "decoder-epoch-99-avg-1-chunk-16-left-128.onnx", "joiner.onnx": "joiner-epoch-99-avg-1-chunk-16-left-128.int8.onnx"},
	}
	want := map[string]string{PiperSynthetic: FamilyVITS, NemoCTCSynthetic: FamilyNemoCTC, KokoroSynthetic: FamilyKokoro, KittenSynthetic: FamilyKitten, MatchaVocosSynthetic: FamilyMatcha, MoonshineV2Synthetic: FamilyMoonshineV2, KokoroMultiSynthetic: FamilyKokoro, OnlineNemoCTCSynthetic: FamilyOnlineNemoCTC, OnlineParaformerSynthetic: FamilyOnlineParaformer, ParaformerSynthetic: FamilyParaformer, MatchaSynthetic: FamilyMatcha, WhisperSynthetic: FamilyWhisper, MoonshineSynthetic: FamilyMoonshine, CanarySynthetic: FamilyCanary, ParakeetSynthetic: FamilyNemoTransducer, DiarizationSynthetic: FamilyDiarization, SenseVoiceSynthetic: FamilySenseVoice, TransducerSynthetic: FamilyTransducer, TransducerBPESynthetic: FamilyTransducer, StreamingSynthetic: FamilyOnlineTransducer}
	for name, ren := range renames {
		dir := copyCheckpoint(t, root, name)
		if err := os.Remove(filepath.Join(dir, catalogue.ManifestName)); err != nil {
			t.Fatal(err)
		}
		for from, to := range ren {
			if err := os.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
				t.Fatal(err)
			}
		}
		m, err := Import(dir, "imported", 4)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var o Options
		if err := json.Unmarshal(m.Options, &o); err != nil || o.Family != want[name] {
			t.Fatalf("%s: options %s, want family %s", name, m.Options, want[name])
		}
		if (o.BpeVocab == "bpe.vocab") != (name == TransducerBPESynthetic) {
			t.Errorf("%s: bpe_vocab %q", name, o.BpeVocab)
		}
		for from, to := range ren {
			if n := map[string]string{"model.onnx": o.Model, "encoder.onnx": o.Encoder, "decoder.onnx": o.Decoder, "joiner.onnx": o.Joiner,
				"tiny.en-encoder.onnx": o.Encoder, "tiny.en-decoder.onnx": o.Decoder, "tiny.en-tokens.txt": o.Tokens,
				"segmentation.onnx": o.Segmentation, "embedding.onnx": o.Embedding}[from]; n != to {
				t.Errorf("%s: option for %s is %q, want %q", name, from, n, to)
			}
		}
		cp, err := catalogue.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		spec := specOf(t, filepath.Dir(dir), filepath.Base(dir), 1, "")
		spec.Task = cp.Task
		if err := e.Validate(spec); err != nil {
			t.Errorf("%s: the imported manifest does not validate: %v", name, err)
		}
	}
	// A folder of something else is refused, naming why.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokens.txt"), []byte("a 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Import(dir, "x", 1); err == nil {
		t.Error("a folder without a model was imported")
	}
}
