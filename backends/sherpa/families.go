package sherpa

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/backends"
)

// A family is one kind of sherpa-onnx model: the task it serves, the
// checkpoint files its options name, and what each ONNX file must hold
// (the inputs, outputs and metadata sherpa-onnx's model class reads; read
// from its sources at 1.13.8: offline-tts-vits-model.cc,
// offline-nemo-enc-dec-ctc-model.cc, offline-transducer-model.cc,
// online-zipformer2-transducer-model.cc). A checkpoint missing any of them
// is refused here, because the library would end the process instead.
type family struct {
	name   string
	task   string
	files  []string           // option keys that must name a file
	onnx   map[string]onnxReq // option key of an ONNX file -> its needs
	tokens string             // "piper" or "asr": how tokens.txt is checked
	// perSlot: the library object is not safe to share between slots, so
	// each slot creates its own (whisper: its DecodeStream rewrites the
	// shared decoder's config, std::string fields included, on every call).
	perSlot bool
}

// onnxReq is what one ONNX file of a family must have.
type onnxReq struct {
	inputs, outputs []string
	meta            []string          // metadata keys that must be present
	intMeta         []string          // of those, the ones that must be integers
	metaHas         map[string]string // metadata key -> a substring its value must contain
}

// Family names (the manifest's options.family).
const (
	FamilyVITS             = "vits"
	FamilyNemoCTC          = "nemo-ctc"
	FamilyTransducer       = "transducer"
	FamilyOnlineTransducer = "online-transducer"
	FamilySenseVoice       = "sense-voice"
	FamilyKokoro           = "kokoro"
	FamilyParaformer       = "paraformer"
	FamilyMatcha           = "matcha"
	FamilyWhisper          = "whisper"
	FamilyMoonshine        = "moonshine"
	FamilyCanary           = "canary"
	FamilyDiarization      = "diarization"
	FamilyNemoTransducer   = "nemo-transducer"
	FamilyKitten           = "kitten"
	FamilyOnlineNemoCTC    = "online-nemo-ctc"
	FamilyOnlineParaformer = "online-paraformer"
	FamilyMoonshineV2      = "moonshine-v2"
)

// canaryTokens are the tokens sherpa-onnx's Canary decoder looks up
// unchecked (its prompt and its end).
var canaryTokens = []string{"<|endoftext|>", "<|startofcontext|>", "<|startoftranscript|>", "<|emo:undefined|>", "<|en|>", "<|es|>",
	"<|de|>", "<|fr|>", "<|pnc|>", "<|nopnc|>", "<|noitn|>", "<|notimestamp|>", "<|nodiarize|>"}

// senseVoiceLangs are the languages SenseVoice's metadata maps (lang_*),
// in sherpa-onnx's option spelling.
var senseVoiceLangs = []string{"zh", "en", "ja", "ko", "yue"}

var families = map[string]family{
	FamilyVITS: {
		name: FamilyVITS, task: "tts", files: []string{"model", "tokens"}, tokens: "piper",
		onnx: map[string]onnxReq{"model": {
			inputs: []string{"input", "input_lengths", "scales"},
			meta:   []string{"sample_rate", "n_speakers", "language", "comment"}, intMeta: []string{"sample_rate", "n_speakers"},
			metaHas: map[string]string{"comment": "piper"},
		}},
	},
	FamilyKokoro: {
		name: FamilyKokoro, task: "tts", files: []string{"model", "voices", "tokens"}, tokens: "kokoro",
		onnx: map[string]onnxReq{"model": {
			inputs: []string{"tokens", "style", "speed"},
			meta:   []string{"sample_rate", "n_speakers", "has_espeak", "style_dim"}, intMeta: []string{"sample_rate", "n_speakers", "has_espeak"},
		}},
	},
	FamilyKitten: {
		name: FamilyKitten, task: "tts", files: []string{"model", "voices", "tokens"}, tokens: "kokoro",
		onnx: map[string]onnxReq{"model": {
			meta:    []string{"model_type", "sample_rate", "n_speakers", "has_espeak", "style_dim"},
			intMeta: []string{"sample_rate", "n_speakers", "has_espeak"},
		}},
	},
	FamilyMatcha: {
		name: FamilyMatcha, task: "tts", files: []string{"acoustic_model", "vocoder", "tokens"}, tokens: "matcha",
		onnx: map[string]onnxReq{
			"acoustic_model": {
				inputs: []string{"x", "x_length"},
				meta:   []string{"sample_rate", "n_speakers", "use_eos_bos", "pad_id", "has_espeak"}, intMeta: []string{"sample_rate", "n_speakers", "use_eos_bos", "pad_id", "has_espeak"},
			},
			"vocoder": {meta: []string{"model_type"}}, // hifigan or vocos: checkVocoder
		},
	},
	FamilyNemoCTC: {
		name: FamilyNemoCTC, task: "asr", files: []string{"model", "tokens"}, tokens: "asr",
		onnx: map[string]onnxReq{"model": {
			inputs: []string{"audio_signal", "length"}, outputs: []string{"logprobs"},
			meta: []string{"vocab_size", "subsampling_factor", "normalize_type", "model_type"}, intMeta: []string{"vocab_size", "subsampling_factor"},
		}},
	},
	FamilySenseVoice: {
		name: FamilySenseVoice, task: "asr", files: []string{"model", "tokens"}, tokens: "asr",
		onnx: map[string]onnxReq{"model": {
			inputs: []string{"x", "x_length", "language", "text_norm"},
			meta: []string{"vocab_size", "lfr_window_size", "lfr_window_shift", "normalize_samples", "with_itn", "without_itn",
				"lang_auto", "lang_zh", "lang_en", "lang_ja", "lang_ko", "lang_yue", "neg_mean", "inv_stddev"},
			intMeta: []string{"vocab_size", "lfr_window_size", "lfr_window_shift", "normalize_samples", "with_itn", "without_itn",
				"lang_auto", "lang_zh", "lang_en", "lang_ja", "lang_ko", "lang_yue"},
		}},
	},
	FamilyParaformer: {
		name: FamilyParaformer, task: "asr", files: []string{"model", "tokens"}, tokens: "asr",
		onnx: map[string]onnxReq{"model": {
			inputs:  []string{"speech", "speech_lengths"},
			meta:    []string{"vocab_size", "lfr_window_size", "lfr_window_shift", "neg_mean", "inv_stddev"},
			intMeta: []string{"vocab_size", "lfr_window_size", "lfr_window_shift"},
		}},
	},
	FamilyWhisper: {
		name: FamilyWhisper, task: "asr", files: []string{"encoder", "decoder", "tokens"}, tokens: "asr", perSlot: true,
		onnx: map[string]onnxReq{
			"encoder": {
				inputs: []string{"mel"}, outputs: []string{"n_layer_cross_k", "n_layer_cross_v"},
				meta: []string{"n_mels", "n_text_layer", "n_text_ctx", "n_text_state", "n_vocab", "sot", "eot", "blank_id", "translate",
					"transcribe", "is_multilingual", "no_timestamps", "no_speech", "sot_sequence"},
				intMeta: []string{"n_mels", "n_text_layer", "n_text_ctx", "n_text_state", "n_vocab", "sot", "eot", "blank_id", "translate",
					"transcribe", "is_multilingual", "no_timestamps", "no_speech"},
			},
			"decoder": {
				inputs:  []string{"tokens", "in_n_layer_self_k_cache", "in_n_layer_self_v_cache", "n_layer_cross_k", "n_layer_cross_v", "offset"},
				outputs: []string{"logits", "out_n_layer_self_k_cache", "out_n_layer_self_v_cache"},
			},
		},
	},
	FamilyMoonshine: {
		name: FamilyMoonshine, task: "asr", files: []string{"preprocessor", "encoder", "uncached_decoder", "cached_decoder", "tokens"}, tokens: "asr",
		onnx: map[string]onnxReq{"preprocessor": {}, "encoder": {}, "uncached_decoder": {}, "cached_decoder": {}},
	},
	FamilyCanary: {
		name: FamilyCanary, task: "asr", files: []string{"encoder", "decoder", "tokens"}, tokens: "asr",
		onnx: map[string]onnxReq{
			"encoder": {
				meta:    []string{"model_type", "vocab_size", "subsampling_factor", "feat_dim"},
				intMeta: []string{"vocab_size", "subsampling_factor", "feat_dim"},
				metaHas: map[string]string{"model_type": "EncDecMultiTaskModel"},
			},
			"decoder": {},
		},
	},
	FamilyDiarization: {
		name: FamilyDiarization, task: "diarization", files: []string{"segmentation", "embedding"}, perSlot: true,
		onnx: map[string]onnxReq{
			"segmentation": {
				meta:    []string{"sample_rate", "window_size", "receptive_field_size", "receptive_field_shift", "num_speakers", "powerset_max_classes", "num_classes"},
				intMeta: []string{"sample_rate", "window_size", "receptive_field_size", "receptive_field_shift", "num_speakers", "powerset_max_classes", "num_classes"},
			},
			"embedding": {
				meta: []string{"framework", "sample_rate", "output_dim", "normalize_samples", "language"}, intMeta: []string{"sample_rate", "output_dim", "normalize_samples"},
			},
		},
	},
	FamilyNemoTransducer: {
		name: FamilyNemoTransducer, task: "asr", files: []string{"encoder", "decoder", "joiner", "tokens"}, tokens: "asr",
		onnx: map[string]onnxReq{
			"encoder": {
				meta:    []string{"vocab_size", "subsampling_factor", "pred_rnn_layers", "pred_hidden", "model_type"},
				intMeta: []string{"vocab_size", "subsampling_factor", "pred_rnn_layers", "pred_hidden"},
			},
			"decoder": {},
			"joiner":  {},
		},
	},
	FamilyTransducer: {
		name: FamilyTransducer, task: "asr", files: []string{"encoder", "decoder", "joiner", "tokens"}, tokens: "asr",
		onnx: map[string]onnxReq{
			"encoder": {inputs: []string{"x", "x_lens"}, outputs: []string{"encoder_out", "encoder_out_lens"}, meta: []string{"model_type"}},
			"decoder": {inputs: []string{"y"}, outputs: []string{"decoder_out"}, meta: []string{"vocab_size", "context_size"}, intMeta: []string{"vocab_size", "context_size"}},
			"joiner":  {inputs: []string{"encoder_out", "decoder_out"}, outputs: []string{"logit"}},
		},
	},
	FamilyOnlineTransducer: {
		name: FamilyOnlineTransducer, task: "asr", files: []string{"encoder", "decoder", "joiner", "tokens"}, tokens: "asr",
		onnx: map[string]onnxReq{
			"encoder": {
				inputs: []string{"x"}, outputs: []string{"encoder_out"},
				meta: []string{"model_type", "decode_chunk_len", "T", "num_encoder_layers", "encoder_dims", "cnn_module_kernels",
					"left_context_len", "query_head_dims", "value_head_dims", "num_heads"},
				intMeta: []string{"decode_chunk_len", "T"},
				metaHas: map[string]string{"model_type": "zipformer2"},
			},
			"decoder": {inputs: []string{"y"}, outputs: []string{"decoder_out"}, meta: []string{"vocab_size", "context_size"}, intMeta: []string{"vocab_size", "context_size"}},
			"joiner":  {inputs: []string{"encoder_out", "decoder_out"}, outputs: []string{"logit"}},
		},
	},
}

// familyOf returns the named family.
func familyOf(name string) (family, error) {
	f, ok := families[name]
	if !ok {
		var have []string
		for n := range families {
			have = append(have, n)
		}
		return family{}, backends.Invalidf("sherpa: option family %q is not one of %s", name, strings.Join(sortStrings(have), ", "))
	}
	return f, nil
}

// checkONNX checks info against req; file names the option for messages.
func (r onnxReq) check(file string, info onnxInfo) error {
	has := func(list []string, n string) bool {
		for _, x := range list {
			if x == n {
				return true
			}
		}
		return false
	}
	for _, n := range r.inputs {
		if !has(info.Inputs, n) {
			return backends.Invalidf("sherpa: %s: the graph has no input %q (inputs: %s)", file, n, strings.Join(info.Inputs, ", "))
		}
	}
	for _, n := range r.outputs {
		if !has(info.Outputs, n) {
			return backends.Invalidf("sherpa: %s: the graph has no output %q (outputs: %s)", file, n, strings.Join(info.Outputs, ", "))
		}
	}
	for _, k := range r.meta {
		if _, ok := info.Meta[k]; !ok {
			return backends.Invalidf("sherpa: %s: no metadata %q (the model's exporter writes it; sherpa-onnx needs it)", file, k)
		}
	}
	for _, k := range r.intMeta {
		v, err := strconv.Atoi(strings.TrimSpace(info.Meta[k]))
		if err != nil || v < 0 || v > 1<<24 {
			return backends.Invalidf("sherpa: %s: metadata %q = %q is not an integer in 0..%d", file, k, info.Meta[k], 1<<24)
		}
	}
	for k, sub := range r.metaHas {
		if !strings.Contains(info.Meta[k], sub) {
			return backends.Invalidf("sherpa: %s: metadata %q = %q does not contain %q", file, k, info.Meta[k], sub)
		}
	}
	return nil
}

// maxTokensBytes bounds a tokens.txt.
const maxTokensBytes = 16 << 20

// checkTokens parses tokens.txt as the family's front end reads it and
// returns the number of tokens. Piper's (piper-phonemize-lexicon.cc) is
// "SYMBOL ID" with a one-code-point symbol (a line with the ID alone is
// the space), no duplicate symbol, and _ ^ $ present (the library looks
// them up unchecked, and a missing one aborts the process). A recognizer's
// is "SYMBOL ID" with IDs 0..n-1.
func checkTokens(path, kind string) (int, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, backends.Invalidf("sherpa: tokens: %v", err)
	}
	if st.Size() > maxTokensBytes {
		return 0, backends.Invalidf("sherpa: tokens %s larger than %d bytes", path, maxTokensBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, backends.Invalidf("sherpa: tokens: %v", err)
	}
	if !utf8.Valid(b) {
		return 0, backends.Invalidf("sherpa: tokens %s is not UTF-8", path)
	}
	seen := map[string]bool{}
	ids := map[int]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 4096), 4096)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			if kind != "asr" {
				return 0, backends.Invalidf("sherpa: tokens line %d is empty", line)
			}
			continue
		}
		f := strings.Fields(text)
		sym, idText := " ", ""
		switch len(f) {
		case 1:
			idText = f[0]
		case 2:
			sym, idText = f[0], f[1]
		default:
			return 0, backends.Invalidf("sherpa: tokens line %d: want SYMBOL ID, got %q", line, text)
		}
		id, err := strconv.Atoi(idText)
		if err != nil || id < 0 || id > 1<<20 {
			return 0, backends.Invalidf("sherpa: tokens line %d: ID %q is not an integer in 0..%d", line, idText, 1<<20)
		}
		if kind != "asr" && utf8.RuneCountInString(sym) != 1 {
			return 0, backends.Invalidf("sherpa: tokens line %d: symbol %q is not one character", line, sym)
		}
		if seen[sym] {
			return 0, backends.Invalidf("sherpa: tokens line %d: symbol %q listed twice", line, sym)
		}
		if kind == "asr" && ids[id] {
			return 0, backends.Invalidf("sherpa: tokens line %d: ID %d listed twice", line, id)
		}
		seen[sym], ids[id] = true, true
	}
	if err := sc.Err(); err != nil {
		return 0, backends.Invalidf("sherpa: tokens %s: %v", path, err)
	}
	if kind == "matcha" {
		for _, s := range []string{"^", "$"} { // looked up unchecked by the Matcha front end
			if !seen[s] {
				return 0, backends.Invalidf("sherpa: tokens %s has no %q (Matcha's start and end symbols are required)", path, s)
			}
		}
	}
	if kind == "piper" {
		for _, s := range []string{"_", "^", "$"} {
			if !seen[s] {
				return 0, backends.Invalidf("sherpa: tokens %s has no %q (Piper's pad, start and end symbols are required)", path, s)
			}
		}
	}
	if kind == "kokoro" && !seen[" "] {
		// Kokoro's front end looks the space up after every '.'.
		return 0, backends.Invalidf("sherpa: tokens %s has no space token (a line with the ID alone)", path)
	}
	if kind == "asr" {
		for i := range len(ids) {
			if !ids[i] {
				return 0, backends.Invalidf("sherpa: tokens %s: IDs are not 0..%d (missing %d)", path, len(ids)-1, i)
			}
		}
	}
	if len(seen) == 0 {
		return 0, backends.Invalidf("sherpa: tokens %s is empty", path)
	}
	return len(seen), nil
}

func sortStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

func metaInt(info onnxInfo, k string) int {
	v, _ := strconv.Atoi(strings.TrimSpace(info.Meta[k]))
	return v
}

var _ = fmt.Sprintf
