package sherpa

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

// copyCheckpoint copies root/name into a fresh root and returns the copy's
// folder.
func copyCheckpoint(t *testing.T, root, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	src := filepath.Join(root, name)
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// remanifest rewrites dir's manifest for the files now in it (sizes and
// hashes), with opts merged over its options, so that only the engine's
// own checks can refuse the checkpoint.
func remanifest(t *testing.T, dir, opts string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, catalogue.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	m, err := catalogue.ParseManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	var files []catalogue.File
	for _, f := range m.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		st, err := os.Stat(p)
		if err != nil {
			continue // removed by the case
		}
		f.Size = st.Size()
		if st.Size() < 1<<30 {
			if f.SHA256, err = catalogue.HashFile(p); err != nil {
				t.Fatal(err)
			}
		}
		files = append(files, f)
	}
	m.Files = files
	if opts != "" {
		if m.Options, err = catalogue.MergeOptions(m.Options, []byte(opts)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, catalogue.ManifestName), out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// setMeta returns the ONNX model b with metadata key set to value, or
// removed when value is "".
func setMeta(t *testing.T, b []byte, key, value string) []byte {
	t.Helper()
	var out []byte
	err := wireFields(b, func(num, wt int, x uint64, v []byte) error {
		if num == modelMetadata && wt == 2 {
			var k string
			_ = wireFields(v, func(n, w int, _ uint64, v []byte) error {
				if n == entryKey {
					k = string(v)
				}
				return nil
			})
			if k == key {
				return nil
			}
		}
		out = appendField(out, num, wt, x, v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if value != "" {
		var e []byte
		e = appendField(e, entryKey, 2, 0, []byte(key))
		e = appendField(e, entryValue, 2, 0, []byte(value))
		out = appendField(out, modelMetadata, 2, 0, e)
	}
	return out
}

func appendField(out []byte, num, wt int, x uint64, v []byte) []byte {
	out = binary.AppendUvarint(out, uint64(num)<<3|uint64(wt))
	switch wt {
	case 0:
		return binary.AppendUvarint(out, x)
	case 2:
		out = binary.AppendUvarint(out, uint64(len(v)))
	}
	return append(out, v...)
}

// TestMalformedRefused: a malformed checkpoint of every family is refused
// (as invalid, naming what is wrong) while a loaded model of the same
// family keeps serving. The cases that Go's checks catch never reach the
// library; the espeak-ng-data case passes them and is caught by the load
// in the child process, which the library ends with exit().
func TestMalformedRefused(t *testing.T) {
	root := testRoot(t)
	e := New(Config{MaxModelBytes: 1 << 30})
	type mut func(t *testing.T, dir string) string // returns option overrides
	modify := func(file string, f func([]byte) []byte) mut {
		return func(t *testing.T, dir string) string {
			p := filepath.Join(dir, file)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, f(b), 0o644); err != nil {
				t.Fatal(err)
			}
			return ""
		}
	}
	remove := func(file string) mut {
		return func(t *testing.T, dir string) string {
			if err := os.Remove(filepath.Join(dir, file)); err != nil {
				t.Fatal(err)
			}
			return ""
		}
	}
	truncate := modify("model.onnx", func(b []byte) []byte { return b[:len(b)*2/3] })
	meta := func(k, v string) mut {
		return func(t *testing.T, dir string) string {
			return modify("model.onnx", func(b []byte) []byte { return setMeta(t, b, k, v) })(t, dir)
		}
	}
	opts := func(o string) mut { return func(*testing.T, string) string { return o } }
	sparse := func(size int64) mut {
		return func(t *testing.T, dir string) string {
			f, err := os.Create(filepath.Join(dir, "model.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(size); err != nil {
				t.Fatal(err)
			}
			return ""
		}
	}
	cases := []struct {
		name, ckpt string
		mut        mut
		want       string // in the error
	}{
		{"piper/truncated", PiperSynthetic, truncate, "not a valid ONNX model"},
		{"piper/no-tokens", PiperSynthetic, remove("tokens.txt"), "tokens"},
		{"piper/tokens-without-pad", PiperSynthetic, modify("tokens.txt", func(b []byte) []byte { return []byte(strings.Replace(string(b), "_ 0\n", "", 1)) }), `no "_"`},
		{"piper/no-sample-rate", PiperSynthetic, meta("sample_rate", ""), `no metadata "sample_rate"`},
		{"piper/not-piper", PiperSynthetic, meta("comment", "coqui"), `"comment"`},
		{"piper/rate", PiperSynthetic, meta("sample_rate", "900"), "sample_rate 900"},
		{"piper/speakers-without-sid", PiperSynthetic, meta("n_speakers", "4"), "no sid input"},
		{"piper/wrong-family", PiperSynthetic, opts(`{"family":"nemo-ctc"}`), "family nemo-ctc serves task asr"},
		{"piper/oversized-sparse", PiperSynthetic, sparse(64 << 30), "more than 1073741824 bytes"},
		{"piper/sparse", PiperSynthetic, sparse(512 << 20), "is sparse"},
		{"piper/espeak-data", PiperSynthetic, modify("espeak-ng-data/phontab", func(b []byte) []byte { return b[:16] }), "child process"},
		{"ctc/truncated", NemoCTCSynthetic, truncate, "not a valid ONNX model"},
		{"ctc/no-tokens", NemoCTCSynthetic, remove("tokens.txt"), "tokens"},
		{"ctc/vocab", NemoCTCSynthetic, meta("vocab_size", "7"), "vocab_size 7"},
		{"ctc/no-subsampling", NemoCTCSynthetic, meta("subsampling_factor", ""), "subsampling_factor"},
		{"ctc/tokens-gap", NemoCTCSynthetic, modify("tokens.txt", func(b []byte) []byte { return []byte(strings.Replace(string(b), "<unk> 0\n", "<unk> 99\n", 1)) }), "IDs are not"},
		{"ctc/wrong-family", NemoCTCSynthetic, opts(`{"family":"vits"}`), "family vits serves task tts"},
	}
	fileMeta := func(file string) func(k, v string) mut {
		return func(k, v string) mut {
			return func(t *testing.T, dir string) string {
				return modify(file, func(b []byte) []byte { return setMeta(t, b, k, v) })(t, dir)
			}
		}
	}
	kittenMeta, paraEncMeta, vocosMeta := fileMeta("model.fp16.onnx"), fileMeta("encoder.onnx"), fileMeta("vocos-22khz-univ.onnx")
	encMeta := func(k, v string) mut {
		return func(t *testing.T, dir string) string {
			return modify("encoder.onnx", func(b []byte) []byte { return setMeta(t, b, k, v) })(t, dir)
		}
	}
	cases = append(cases, []struct {
		name, ckpt string
		mut        mut
		want       string
	}{
		{"streaming/truncated-joiner", StreamingSynthetic, modify("joiner.onnx", func(b []byte) []byte { return b[:len(b)/2] }), "not a valid ONNX model"},
		{"streaming/no-decoder", StreamingSynthetic, remove("decoder.onnx"), "decoder"},
		{"streaming/not-zipformer2", StreamingSynthetic, encMeta("model_type", "conformer"), `"model_type"`},
		{"streaming/layers", StreamingSynthetic, encMeta("num_encoder_layers", "1,1"), "has 1 entries, num_encoder_layers 2"},
		{"streaming/chunk", StreamingSynthetic, encMeta("T", "3"), "decode_chunk_len"},
		{"streaming/no-left-context", StreamingSynthetic, encMeta("left_context_len", ""), "left_context_len"},
		{"streaming/vocab", StreamingSynthetic, modify("decoder.onnx", func(b []byte) []byte { return setMeta(t, b, "vocab_size", "9") }), "vocab_size 9"},
		{"streaming/wrong-family", StreamingSynthetic, opts(`{"family":"vits"}`), "family vits serves task tts"},
		{"transducer/truncated-encoder", TransducerSynthetic, modify("encoder.onnx", func(b []byte) []byte { return b[:len(b)-9] }), "not a valid ONNX model"},
		{"transducer/no-joiner", TransducerSynthetic, remove("joiner.onnx"), "joiner"},
		// bpe.vocab: the library's encoder exits the process on a line
		// it cannot read, so each is refused first.
		{"bpe/empty-line", TransducerBPESynthetic, modify("bpe.vocab", func(b []byte) []byte { return append(b, '\n') }), "line"},
		{"bpe/hex-score", TransducerBPESynthetic, modify("bpe.vocab", func(b []byte) []byte { return []byte(strings.Replace(string(b), "<unk>\t0", "<unk>\t0x1p3", 1)) }), "want a piece and its score"},
		{"bpe/no-vocab", TransducerBPESynthetic, remove("bpe.vocab"), "bpe_vocab"},
		{"bpe/byte-pieces", TransducerBPESynthetic, modify("bpe.vocab", func(b []byte) []byte { return append(b, "<0x00>\t0\n"...) }), "fewer than 256"},
		{"bpe/unit", TransducerBPESynthetic, opts(`{"modeling_unit":"wordpiece"}`), "modeling_unit"},
		{"bpe/unit-without-vocab", TransducerSynthetic, opts(`{"modeling_unit":"bpe"}`), "needs option bpe_vocab"},
		{"bpe/not-transducer", NemoCTCSynthetic, opts(`{"modeling_unit":"cjkchar"}`), "only the transducer families"},
		{"transducer/unknown-type", TransducerSynthetic, encMeta("model_type", "lstm7"), "model_type"},
		{"transducer/streaming-export", TransducerSynthetic, encMeta("decode_chunk_len", "32"), "streaming export"},
		{"transducer/context", TransducerSynthetic, modify("decoder.onnx", func(b []byte) []byte { return setMeta(t, b, "context_size", "0") }), "context_size 0"},
		{"matcha/vocos", MatchaSynthetic, modify("hifigan_v2.onnx", func(b []byte) []byte { return setMeta(t, b, "model_type", "vocos") }), "a Vocos vocoder with 1 outputs"},
		{"matcha/vocoder-type", MatchaSynthetic, modify("hifigan_v2.onnx", func(b []byte) []byte { return setMeta(t, b, "model_type", "wavenet") }), `model_type "wavenet"`},
		{"matcha-vocos/n-fft", MatchaVocosSynthetic, vocosMeta("n_fft", "2048"), "has 513 bins; n_fft 2048 makes 1025"},
		{"matcha-vocos/hop", MatchaVocosSynthetic, vocosMeta("hop_length", "4096"), "hop_length 4096"},
		{"matcha-vocos/window", MatchaVocosSynthetic, vocosMeta("window_type", "kaiser"), `window_type "kaiser"`},
		{"matcha-vocos/as-hifigan", MatchaVocosSynthetic, vocosMeta("model_type", "hifigan"), "HiFi-GAN vocoder with 3 outputs"},
		{"matcha/no-vocoder", MatchaSynthetic, remove("hifigan_v2.onnx"), "vocoder"},
		{"matcha/lexicon", MatchaSynthetic, modify("model-steps-3.onnx", func(b []byte) []byte { return setMeta(t, b, "has_espeak", "0") }), "has_espeak 1"},
		{"matcha/no-bos", MatchaSynthetic, modify("tokens.txt", func(b []byte) []byte { return []byte(strings.Replace(string(b), "^ 1\n", "", 1)) }), `no "^"`},
		{"matcha/truncated", MatchaSynthetic, modify("model-steps-3.onnx", func(b []byte) []byte { return b[:100] }), "not a valid ONNX model"},
		{"whisper/sot", WhisperSynthetic, modify("tiny.en-encoder.onnx", func(b []byte) []byte { return setMeta(t, b, "sot_sequence", "x") }), "sot_sequence"},
		{"whisper/multilingual", WhisperSynthetic, modify("tiny.en-encoder.onnx", func(b []byte) []byte { return setMeta(t, b, "is_multilingual", "1") }), "sot_sequence"},
		{"whisper/mels", WhisperSynthetic, modify("tiny.en-encoder.onnx", func(b []byte) []byte { return setMeta(t, b, "n_mels", "40") }), "n_mels 40"},
		{"whisper/decoder-inputs", WhisperSynthetic, func(t *testing.T, dir string) string {
			b, err := os.ReadFile(filepath.Join(dir, "tiny.en-encoder.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "tiny.en-decoder.onnx"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			return ""
		}, `no input "tokens"`},
		{"whisper/language", WhisperSynthetic, opts(`{"language":"de"}`), `option language "de"`},
		{"whisper/long", WhisperSynthetic, opts(`{"max_seconds":60}`), "at most 30 s"},
		{"whisper-multi/language-token", WhisperMultiSynthetic, modify("tiny-encoder.onnx", func(b []byte) []byte { return setMeta(t, b, "all_language_tokens", "70,71,72,9999") }), "not below n_vocab"},
		{"whisper-multi/language", WhisperMultiSynthetic, opts(`{"language":"zh"}`), `option language "zh"`},
		{"moonshine/states", MoonshineSynthetic, func(t *testing.T, dir string) string {
			b, err := os.ReadFile(filepath.Join(dir, "uncached_decode.int8.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "cached_decode.int8.onnx"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			return ""
		}, "cached_decoder: 3 inputs"},
		{"moonshine/truncated", MoonshineSynthetic, modify("encode.int8.onnx", func(b []byte) []byte { return b[:len(b)/3] }), "not a valid ONNX model"},
		{"moonshine/no-preprocessor", MoonshineSynthetic, remove("preprocess.onnx"), "preprocess"},
		{"canary/prompt-token", CanarySynthetic, modify("tokens.txt", func(b []byte) []byte { return []byte(strings.Replace(string(b), "<|nodiarize|>", "<|diarize|>", 1)) }), "no <|nodiarize|>"},
		{"canary/model-type", CanarySynthetic, modify("encoder.int8.onnx", func(b []byte) []byte { return setMeta(t, b, "model_type", "EncDecCTCModelBPE") }), `"model_type"`},
		{"canary/layers", CanarySynthetic, modify("encoder.int8.onnx", func(b []byte) []byte { return setMeta(t, b, "num_decoder_layers", "6") }), "6 decoder layers"},
		{"canary/vocab", CanarySynthetic, modify("encoder.int8.onnx", func(b []byte) []byte { return setMeta(t, b, "vocab_size", "99") }), "vocab_size 99"},
		{"canary/language", CanarySynthetic, opts(`{"language":"it"}`), `option language "it"`},
		{"diarization/powerset", DiarizationSynthetic, modify("segmentation.onnx", func(b []byte) []byte { return setMeta(t, b, "num_classes", "8") }), "num_classes 8"},
		{"diarization/window", DiarizationSynthetic, modify("segmentation.onnx", func(b []byte) []byte { return setMeta(t, b, "receptive_field_size", "999999") }), "inconsistent"},
		{"diarization/nemo", DiarizationSynthetic, modify("embedding.onnx", func(b []byte) []byte { return setMeta(t, b, "framework", "nemo") }), `framework "nemo"`},
		{"diarization/rate", DiarizationSynthetic, modify("embedding.onnx", func(b []byte) []byte { return setMeta(t, b, "sample_rate", "8000") }), "sample_rate"},
		{"diarization/no-embedding", DiarizationSynthetic, remove("embedding.onnx"), "embedding"},
		{"diarization/truncated", DiarizationSynthetic, modify("segmentation.onnx", func(b []byte) []byte { return b[:len(b)/2] }), "not a valid ONNX model"},
		{"parakeet/joiner-size", ParakeetSynthetic, modify("encoder.int8.onnx", func(b []byte) []byte { return setMeta(t, b, "url", "rnnt") }), "output size"},
		{"parakeet/vocab", ParakeetSynthetic, modify("encoder.int8.onnx", func(b []byte) []byte { return setMeta(t, b, "vocab_size", "9") }), "vocab_size 9"},
		{"parakeet/no-pred-hidden", ParakeetSynthetic, modify("encoder.int8.onnx", func(b []byte) []byte { return setMeta(t, b, "pred_hidden", "") }), "pred_hidden"},
		{"parakeet/decoder", ParakeetSynthetic, func(t *testing.T, dir string) string {
			b, err := os.ReadFile(filepath.Join(dir, "joiner.int8.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "decoder.int8.onnx"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			return ""
		}, "decoder: 2 inputs"},
		{"kokoro/voices-size", KokoroSynthetic, modify("voices.bin", func(b []byte) []byte { return b[:len(b)-4] }), "voices voices.bin is 16380 bytes"},
		{"kokoro/style-dim", KokoroSynthetic, meta("style_dim", "64,2,32"), "style_dim"},
		{"kokoro/multi-lang", KokoroSynthetic, meta("version", "2"), "the multi-language front end needs"},
		{"kokoro/version", KokoroSynthetic, meta("version", "3"), "version 3"},
		{"kokoro/lexicon-on-v1", KokoroSynthetic, opts(`{"lang":"es"}`), "multi-language Kokoro models"},
		{"kokoro-multi/lang", KokoroMultiSynthetic, opts(`{"lang":"xx-yy"}`), `lang "xx-yy"`},
		{"kokoro-multi/no-lexicon-file", KokoroMultiSynthetic, remove("lexicon-zh.txt"), "lexicon-zh.txt"},
		{"kokoro-multi/lexicon-escape", KokoroMultiSynthetic, opts(`{"lexicon":"../../etc/passwd"}`), "lexicon"},
		{"kokoro-multi/no-quote", KokoroMultiSynthetic, modify("tokens.txt", func(b []byte) []byte { return []byte(strings.Replace(string(b), "\u201c ", "\u0394 ", 1)) }), "has no"},
		{"kokoro/no-space", KokoroSynthetic, modify("tokens.txt", func(b []byte) []byte { return []byte(strings.Replace(string(b), "\n1\n", "\n", 1)) }), "no space token"},
		{"kokoro/names", KokoroSynthetic, meta("speaker_names", "a,b,c"), "3 speaker names for 2 speakers"},
		{"kokoro/no-voices", KokoroSynthetic, remove("voices.bin"), "voices"},
		{"moonshine-v2/tokens-not-base64", MoonshineV2Synthetic, modify("tokens.txt", func(b []byte) []byte { return []byte(strings.Replace(string(b), "PHVuaz4= 0\n", "it's 0\n", 1)) }), "not base64"},
		{"moonshine-v2/no-decoder", MoonshineV2Synthetic, remove("decoder_model_merged.onnx"), "merged_decoder"},
		{"moonshine-v2/truncated", MoonshineV2Synthetic, modify("decoder_model_merged.onnx", func(b []byte) []byte { return b[:len(b)/2] }), "not a valid ONNX model"},
		{"moonshine-v2/as-v1", MoonshineV2Synthetic, opts(`{"family":"moonshine"}`), "preprocessor"},
		{"moonshine-v2/wrong-decoder", MoonshineV2Synthetic, opts(`{"merged_decoder":"encoder_model.onnx"}`), "merged_decoder: 1 inputs"},
		{"nemo-streaming/cache-dim", OnlineNemoCTCSynthetic, meta("cache_last_time_dim2", "0"), "cache_last_time_dim2 0"},
		{"nemo-streaming/no-window", OnlineNemoCTCSynthetic, meta("window_size", ""), `no metadata "window_size"`},
		{"nemo-streaming/shift", OnlineNemoCTCSynthetic, meta("chunk_shift", "99"), "chunk_shift 99"},
		{"nemo-streaming/no-blank", OnlineNemoCTCSynthetic, modify("tokens.txt", func(b []byte) []byte { return []byte(strings.Replace(string(b), "<blk>", "<bl>", 1)) }), "no blank"},
		{"nemo-streaming/offline", NemoCTCSynthetic, opts(`{"family":"online-nemo-ctc"}`), "no metadata"},
		{"paraformer-streaming/blocks", OnlineParaformerSynthetic, paraEncMeta("decoder_num_blocks", "3"), "3 decoder blocks"},
		{"paraformer-streaming/kernel", OnlineParaformerSynthetic, paraEncMeta("decoder_kernel_size", "1"), "decoder_kernel_size 1"},
		{"paraformer-streaming/cmvn", OnlineParaformerSynthetic, paraEncMeta("neg_mean", "1,2"), "neg_mean has 2 values"},
		{"paraformer-streaming/no-decoder", OnlineParaformerSynthetic, remove("decoder.onnx"), "decoder"},
		{"paraformer-streaming/truncated", OnlineParaformerSynthetic, modify("encoder.onnx", func(b []byte) []byte { return b[:len(b)/2] }), "not a valid ONNX model"},
		{"kitten/voices-size", KittenSynthetic, modify("voices.bin", func(b []byte) []byte { return b[:len(b)-4] }), "voices voices.bin is 380 bytes"},
		{"kitten/style-dim", KittenSynthetic, kittenMeta("style_dim", "1,1,32"), "style_dim"},
		{"kitten/model-type", KittenSynthetic, kittenMeta("model_type", "kokoro"), "want kitten-tts"},
		{"kitten/priors", KittenSynthetic, kittenMeta("speaker_speed_priors", "1,1"), "2 values for 3 speakers"},
		{"kitten/no-space", KittenSynthetic, modify("tokens.txt", func(b []byte) []byte { return []byte(strings.Replace(string(b), "\n1\n", "\n", 1)) }), "no space token"},
		{"paraformer/no-eos", ParaformerSynthetic, modify("tokens.txt", func(b []byte) []byte { return []byte(strings.Replace(string(b), "</s> 2\n", "</S> 2\n", 1)) }), "no </s>"},
		{"paraformer/inv-stddev", ParaformerSynthetic, meta("inv_stddev", "x"), "inv_stddev has 1 values"},
		{"paraformer/no-lfr", ParaformerSynthetic, meta("lfr_window_size", ""), "lfr_window_size"},
		{"sense-voice/neg-mean", SenseVoiceSynthetic, meta("neg_mean", "-8,-8"), "neg_mean has 2 values"},
		{"sense-voice/lang-id", SenseVoiceSynthetic, meta("lang_en", "5000"), "not a token ID"},
		{"sense-voice/no-itn", SenseVoiceSynthetic, meta("with_itn", ""), `no metadata "with_itn"`},
		{"sense-voice/lfr", SenseVoiceSynthetic, meta("lfr_window_shift", "9"), "lfr_window_shift 9"},
		{"sense-voice/language", SenseVoiceSynthetic, opts(`{"language":"fr"}`), `option language "fr"`},
		{"transducer/as-streaming", TransducerSynthetic, opts(`{"family":"online-transducer"}`), "no metadata"},
	}...)
	good := map[string]backends.Session{}
	for _, name := range SyntheticNames { // every family keeps serving
		good[name] = open(t, e, root, name, "")
	}
	serve := func(name string) {
		t.Helper()
		in := backends.Request{Input: []byte(`{"text":"Still here."}`)}
		if name == DiarizationSynthetic {
			in = backends.Request{Input: []byte(`{"sample_rate":16000}`), Data: make([]byte, 2*16000*12)}
		} else if families[synthetic[name].opts["family"].(string)].task != "tts" {
			in = backends.Request{Input: []byte(`{"sample_rate":16000}`), Data: make([]byte, 32000)}
		}
		if _, err := good[name].Infer(context.Background(), in, nil); err != nil {
			t.Fatalf("the loaded %s stopped serving: %v", name, err)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyCheckpoint(t, root, c.ckpt)
			o := c.mut(t, dir)
			remanifest(t, dir, o)
			spec := backends.Spec{Model: "bad", Task: families[synthetic[c.ckpt].opts["family"].(string)].task,
				Engine: Name, Checkpoint: dir, Options: []byte("{}"), Slots: 1}
			err := e.Validate(spec)
			if err == nil {
				_, _, err = e.Open(context.Background(), spec)
			}
			if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an invalid error containing %q", err, c.want)
			}
			t.Log(err)
			serve(c.ckpt)
		})
	}
}
