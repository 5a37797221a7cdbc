package sherpa

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"unicode/utf8"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

// The later families join the table as a package variable, not in an
// init function: the child load (child.go) runs in an init function,
// which may run before this file's.
var _ = addFamilies()

func addFamilies() bool {
	families[FamilyOnlineNemoCTC] = family{
		name: FamilyOnlineNemoCTC, task: "asr", files: []string{"model", "tokens"}, tokens: "asr",
		onnx: map[string]onnxReq{"model": {
			meta:    append([]string{"vocab_size", "window_size", "chunk_shift", "subsampling_factor"}, nemoCacheDims...),
			intMeta: append([]string{"vocab_size", "window_size", "chunk_shift", "subsampling_factor"}, nemoCacheDims...),
		}},
	}
	families[FamilyOnlineParaformer] = family{
		name: FamilyOnlineParaformer, task: "asr", files: []string{"encoder", "decoder", "tokens"}, tokens: "asr",
		onnx: map[string]onnxReq{
			"encoder": {
				meta: []string{"vocab_size", "lfr_window_size", "lfr_window_shift", "encoder_output_size", "decoder_num_blocks",
					"decoder_kernel_size", "neg_mean", "inv_stddev"},
				intMeta: []string{"vocab_size", "lfr_window_size", "lfr_window_shift", "encoder_output_size", "decoder_num_blocks", "decoder_kernel_size"},
			},
			"decoder": {},
		},
	}
	families[FamilyMoonshineV2] = family{
		name: FamilyMoonshineV2, task: "asr", files: []string{"encoder", "merged_decoder", "tokens"}, tokens: "asr",
		onnx: map[string]onnxReq{"encoder": {}, "merged_decoder": {}},
	}
	return true
}

// nemoCacheDims are the metadata keys of a NeMo cache-aware streaming
// model's cache shapes (online-nemo-ctc-model.cc allocates its initial
// caches from them).
var nemoCacheDims = []string{"cache_last_channel_dim1", "cache_last_channel_dim2", "cache_last_channel_dim3",
	"cache_last_time_dim1", "cache_last_time_dim2", "cache_last_time_dim3"}

// streaming reports whether the family is an online (streaming)
// recognizer: live sessions need one.
func (f family) streaming() bool {
	return f.name == FamilyOnlineTransducer || f.name == FamilyOnlineNemoCTC || f.name == FamilyOnlineParaformer
}

// checkMoreFamilies checks the families added after the first fourteen
// (Kitten, the Vocos vocoder's Matcha, Moonshine v2, the streaming
// Paraformer and NeMo CTC), each against what its sherpa-onnx model class
// reads without checking.
func (c *config) checkMoreFamilies() error {
	switch c.fam.name {
	case FamilyKitten:
		return c.checkKitten()
	case FamilyOnlineNemoCTC:
		return c.checkOnlineNemoCTC()
	case FamilyOnlineParaformer:
		return c.checkOnlineParaformer()
	case FamilyMoonshineV2:
		return c.checkMoonshineV2()
	}
	return nil
}

// checkKitten: offline-tts-kitten-model.cc exits unless model_type is
// kitten-tts, has_espeak is 1, style_dim is "rows,dim" and voices.bin
// holds n_speakers x rows x dim floats; it feeds the graph's three inputs
// by position (the phoneme IDs, the style row, the speed).
func (c *config) checkKitten() error {
	m := c.infos["model"]
	if mt := m.Meta["model_type"]; mt != "kitten-tts" {
		return backends.Invalidf("sherpa: model: metadata model_type %q, want kitten-tts", mt)
	}
	if metaInt(m, "has_espeak") != 1 {
		return backends.Invalidf("sherpa: model: metadata has_espeak must be 1 (Kitten is phonemized by espeak-ng)")
	}
	if len(m.Inputs) != 3 || len(m.Outputs) < 1 {
		return backends.Invalidf("sherpa: model: %d inputs and %d outputs, want phoneme IDs, style and speed in, audio out", len(m.Inputs), len(m.Outputs))
	}
	c.rate = metaInt(m, "sample_rate")
	if c.rate < 8000 || c.rate > 48000 {
		return backends.Invalidf("sherpa: model: metadata sample_rate %d outside 8000..48000", c.rate)
	}
	c.speakers = metaInt(m, "n_speakers")
	if c.speakers < 1 || c.speakers > 4096 {
		return backends.Invalidf("sherpa: model: metadata n_speakers %d outside 1..4096", c.speakers)
	}
	d, err := dimList(m.Meta["style_dim"], 2)
	if err != nil {
		return backends.Invalidf("sherpa: model: metadata style_dim %q: want rows,dim (%v)", m.Meta["style_dim"], err)
	}
	st, err := os.Stat(c.files["voices"])
	if err != nil {
		return backends.Invalidf("sherpa: voices: %v", err)
	}
	if want := int64(4 * d[0] * d[1] * c.speakers); st.Size() != want {
		return backends.Invalidf("sherpa: voices %s is %d bytes; style_dim %s x %d speakers is %d", c.opts.Voices, st.Size(), m.Meta["style_dim"], c.speakers, want)
	}
	if p := m.Meta["speaker_speed_priors"]; p != "" {
		if n := len(strings.Split(p, ",")); n != c.speakers {
			return backends.Invalidf("sherpa: model: metadata speaker_speed_priors has %d values for %d speakers", n, c.speakers)
		}
	}
	if names := m.Meta["speaker_names"]; names != "" && len(c.opts.Speakers) == 0 {
		c.opts.Speakers = strings.Split(names, ",")
	}
	if len(c.opts.Speakers) > 0 && len(c.opts.Speakers) != c.speakers {
		return backends.Invalidf("sherpa: %d speaker names for %d speakers", len(c.opts.Speakers), c.speakers)
	}
	if c.files["data_dir"] == "" {
		return backends.Invalidf("sherpa: family kitten needs option data_dir (espeak-ng-data)")
	}
	return nil
}

// dimList parses n comma-separated dimensions, each in 1..4096.
func dimList(s string, n int) ([]int, error) {
	parts := strings.Split(s, ",")
	if len(parts) != n {
		return nil, backends.Invalidf("%d values, want %d", len(parts), n)
	}
	out := make([]int, n)
	for i, p := range parts {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 1 || v > 4096 {
			return nil, backends.Invalidf("%q is not in 1..4096", p)
		}
		out[i] = v
	}
	return out, nil
}

// checkOnlineNemoCTC: online-nemo-ctc-model.cc feeds its five inputs by
// position (features, length, the three caches) and keeps all outputs but
// the second as the next states; it allocates the caches from the
// metadata's dimensions; the recognizer exits unless tokens.txt holds a
// blank (<blk>, <eps> or <blank>).
func (c *config) checkOnlineNemoCTC() error {
	m := c.infos["model"]
	if len(m.Inputs) != 5 || len(m.Outputs) != 5 {
		return backends.Invalidf("sherpa: model: %d inputs and %d outputs; a cache-aware streaming CTC model has 5 and 5 (features, length, three caches)", len(m.Inputs), len(m.Outputs))
	}
	if v := metaInt(m, "vocab_size"); v != c.nTokens {
		return backends.Invalidf("sherpa: model: metadata vocab_size %d but tokens has %d", v, c.nTokens)
	}
	win, shift, sub := metaInt(m, "window_size"), metaInt(m, "chunk_shift"), metaInt(m, "subsampling_factor")
	if win < 1 || win > 1024 || shift < 1 || shift > win || sub < 1 || sub > 64 {
		return backends.Invalidf("sherpa: model: metadata window_size %d, chunk_shift %d, subsampling_factor %d: want 1 <= chunk_shift <= window_size <= 1024, subsampling 1..64", win, shift, sub)
	}
	for _, k := range nemoCacheDims {
		if v := metaInt(m, k); v < 1 || v > 4096 {
			return backends.Invalidf("sherpa: model: metadata %s %d outside 1..4096", k, v)
		}
	}
	if err := c.needBlank(); err != nil {
		return err
	}
	c.rate = SampleRate
	return nil
}

// checkOnlineParaformer: the streaming Paraformer's encoder takes features
// and their length and returns encoder_out, its length and the CIF
// alphas; the decoder takes those, the fired embeddings, their count and
// decoder_num_blocks states of [1, encoder_output_size,
// decoder_kernel_size - 1], and returns logits, sample_ids and the
// states; all by position.
func (c *config) checkOnlineParaformer() error {
	enc, dec := c.infos["encoder"], c.infos["decoder"]
	if v := metaInt(enc, "vocab_size"); v != c.nTokens {
		return backends.Invalidf("sherpa: encoder: metadata vocab_size %d but tokens has %d", v, c.nTokens)
	}
	if err := checkLFR(enc); err != nil {
		return err
	}
	blocks, kernel, d := metaInt(enc, "decoder_num_blocks"), metaInt(enc, "decoder_kernel_size"), metaInt(enc, "encoder_output_size")
	switch {
	case blocks < 1 || blocks > 64 || kernel < 2 || kernel > 64 || d < 1 || d > 8192:
		return backends.Invalidf("sherpa: encoder: metadata decoder_num_blocks %d, decoder_kernel_size %d, encoder_output_size %d out of range", blocks, kernel, d)
	case len(enc.Inputs) != 2 || len(enc.Outputs) != 3:
		return backends.Invalidf("sherpa: encoder: %d inputs and %d outputs, want features and length in, encoder_out, its length and alphas out", len(enc.Inputs), len(enc.Outputs))
	case len(dec.Inputs) != 4+blocks || len(dec.Outputs) != 2+blocks:
		return backends.Invalidf("sherpa: decoder: %d inputs and %d outputs; %d decoder blocks need %d and %d", len(dec.Inputs), len(dec.Outputs), blocks, 4+blocks, 2+blocks)
	}
	c.rate = SampleRate
	return nil
}

// needBlank checks that tokens.txt names a CTC blank as the online CTC
// recognizer looks it up (it exits otherwise).
func (c *config) needBlank() error {
	b, err := os.ReadFile(c.files["tokens"])
	if err != nil {
		return backends.Invalidf("sherpa: tokens: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && (f[0] == "<blk>" || f[0] == "<eps>" || f[0] == "<blank>") {
			return nil
		}
	}
	return backends.Invalidf("sherpa: tokens has no blank (<blk>, <eps> or <blank>; the streaming CTC decoder needs one)")
}

// tailPadding is the silence a streaming turn gets at its commit
// (samples at 16 kHz): enough for the model's last chunk to be decoded.
// The library decodes a chunk only once a whole one (and, for the CTC and
// Paraformer models, one frame more) is ready: the Zipformer2's chunk is
// decode_chunk_len frames, NeMo's window_size, the Paraformer's 61 fbank
// frames (online-recognizer-paraformer-impl.h), each 10 ms.
func (c *config) tailPadding() int {
	frames := 0
	switch c.fam.name {
	case FamilyOnlineNemoCTC:
		frames = metaInt(c.infos["model"], "window_size")
	case FamilyOnlineParaformer:
		frames = 61
	}
	return max(tailPadding, (frames+20)*SampleRate/100)
}

// checkVocoder checks Matcha's vocoder as vocoder.cc picks and runs it:
// metadata model_type hifigan (one output, the audio) or vocos ("vocos"
// or "matcha-tts vocos": the STFT's magnitude and the phase's cosine and
// sine, then an inverse STFT of n_fft, hop_length and win_length, with
// defaults 1024, 256 and 1024, and a hann or hamming window).
func checkVocoder(v onnxInfo) error {
	if len(v.Inputs) != 1 {
		return backends.Invalidf("sherpa: vocoder: %d inputs, want the mel spectrogram alone", len(v.Inputs))
	}
	switch mt := v.Meta["model_type"]; mt {
	case "hifigan":
		if len(v.Outputs) != 1 {
			return backends.Invalidf("sherpa: vocoder: a HiFi-GAN vocoder with %d outputs, want the audio alone", len(v.Outputs))
		}
	case "vocos", "matcha-tts vocos":
		if len(v.Outputs) != 3 {
			return backends.Invalidf("sherpa: vocoder: a Vocos vocoder with %d outputs, want mag, x and y", len(v.Outputs))
		}
		get := func(k string, def int) int {
			if s, ok := v.Meta[k]; ok {
				n, err := strconv.Atoi(strings.TrimSpace(s))
				if err != nil {
					return -1
				}
				return n
			}
			return def
		}
		nfft, hop, win := get("n_fft", 1024), get("hop_length", 256), get("win_length", 1024)
		if nfft < 16 || nfft > 8192 || hop < 1 || hop > nfft || win < 1 || win > nfft {
			return backends.Invalidf("sherpa: vocoder: metadata n_fft %d, hop_length %d, win_length %d: want 1 <= hop_length, win_length <= n_fft <= 8192", nfft, hop, win)
		}
		for _, o := range v.Outputs {
			if d := v.OutDims[o]; len(d) == 3 && d[1] > 0 && d[1] != int64(nfft/2+1) {
				return backends.Invalidf("sherpa: vocoder: output %s has %d bins; n_fft %d makes %d", o, d[1], nfft, nfft/2+1)
			}
		}
		if w, ok := v.Meta["window_type"]; ok && w != "hann" && w != "hamming" && w != "povey" {
			return backends.Invalidf("sherpa: vocoder: metadata window_type %q, want hann, hamming or povey", w)
		}
	default:
		return backends.Invalidf("sherpa: vocoder: metadata model_type %q, want hifigan or vocos", mt)
	}
	return nil
}

// checkMoonshineV2: offline-moonshine-model-v2.cc feeds the encoder the
// audio (and a mask when it has a second input) and the merged decoder,
// by position, [encoder_attention_mask,] input_ids, encoder_hidden_states,
// four caches per layer and use_cache_branch; it counts the layers from
// the inputs, takes heads and head_dim from the first key_values input's
// shape (exiting unless it has four dimensions), and moves output 1 + i
// into cache i. The greedy search starts at token 1 and ends at 2.
func (c *config) checkMoonshineV2() error {
	enc, dec := c.infos["encoder"], c.infos["merged_decoder"]
	if len(enc.Inputs) < 1 || len(enc.Inputs) > 2 || len(enc.Outputs) < 1 {
		return backends.Invalidf("sherpa: encoder: %d inputs and %d outputs, want the audio (and its mask) in, the hidden states out", len(enc.Inputs), len(enc.Outputs))
	}
	fixed := 3
	for _, n := range dec.Inputs {
		if strings.Contains(n, "encoder_attention_mask") {
			fixed = 4
		}
	}
	kv := len(dec.Inputs) - fixed
	if kv < 4 || kv%4 != 0 || len(dec.Outputs) != 1+kv {
		return backends.Invalidf("sherpa: merged_decoder: %d inputs and %d outputs: want %d fixed inputs, four caches per layer, and logits plus the caches out", len(dec.Inputs), len(dec.Outputs), fixed)
	}
	first := ""
	for _, n := range dec.Inputs {
		if strings.Contains(n, "key_values") {
			first = n
			break
		}
	}
	if first == "" {
		return backends.Invalidf("sherpa: merged_decoder: no past_key_values input")
	}
	// The caches' shapes are read from the first cache output (the
	// library reads the input's; an export declares both alike).
	d := dec.OutDims[dec.Outputs[1]]
	if len(d) != 4 || d[1] < 1 || d[1] > 1024 || d[3] < 1 || d[3] > 4096 {
		return backends.Invalidf("sherpa: merged_decoder: cache %s has shape %v; want [batch, heads, seq, head_dim] with heads and head_dim declared", dec.Outputs[1], d)
	}
	if c.nTokens < 3 {
		return backends.Invalidf("sherpa: tokens has %d tokens; Moonshine's start and end are 1 and 2", c.nTokens)
	}
	if err := c.base64Tokens(); err != nil {
		return err
	}
	c.rate = SampleRate
	return nil
}

// base64Tokens checks a tokens.txt whose symbols the library decodes as
// base64 at load (Whisper's, Moonshine v2's): its decoder exits on a
// character outside the alphabet and reads past the end of a symbol
// whose length is not a multiple of 4.
func (c *config) base64Tokens() error {
	b, err := os.ReadFile(c.files["tokens"])
	if err != nil {
		return backends.Invalidf("sherpa: tokens: %v", err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if _, err := base64.StdEncoding.DecodeString(f[0]); err != nil || len(f[0])%4 != 0 {
			return backends.Invalidf("sherpa: tokens line %d: symbol %q is not base64 (this model's tokens.txt is base64-encoded)", i+1, f[0])
		}
	}
	return nil
}

// kokoroLangs maps the first letter of a Kokoro v1.0 voice name to the
// espeak-ng voice of its language (Kokoro's naming convention).
var kokoroLangs = map[byte]string{'a': "en-us", 'b': "en", 'e': "es", 'f': "fr", 'h': "hi", 'i': "it", 'j': "ja", 'p': "pt-br", 'z': "cmn"}

// kokoroPunct are the punctuation marks kokoro-multi-lang-lexicon.cc looks
// up in tokens.txt unchecked (a missing one aborts the process).
var kokoroPunct = []string{";", ":", ",", ".", "!", "?", "\u2014", "\u2026", "\"", "(", ")", "\u201c", "\u201d"}

// maxLexiconBytes bounds each lexicon file.
const maxLexiconBytes = 64 << 20

// checkKokoroMulti checks a multi-language Kokoro (metadata version 2):
// the library exits unless it has lexicons or a language; its front end
// looks the punctuation marks up unchecked; espeak-ng aborts on a voice
// its data has not. A version 1 model takes neither option.
func (c *config) checkKokoroMulti() error {
	m := c.infos["model"]
	if metaInt(m, "version") < 2 {
		if c.opts.Lexicon != "" || c.opts.Lang != "" {
			return backends.Invalidf("sherpa: options lexicon and lang are for multi-language Kokoro models (metadata version 2)")
		}
		return nil
	}
	var paths []string
	for _, f := range strings.Split(c.opts.Lexicon, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := catalogue.Within(c.dir, f)
		if err != nil {
			return fmt.Errorf("sherpa: option lexicon: %w", err)
		}
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() || st.Size() > maxLexiconBytes {
			return backends.Invalidf("sherpa: lexicon %s: not a file of at most %d bytes", f, maxLexiconBytes)
		}
		b, err := os.ReadFile(p)
		if err != nil || !utf8.Valid(b) {
			return backends.Invalidf("sherpa: lexicon %s is not UTF-8 text", f)
		}
		paths = append(paths, p)
	}
	c.files["lexicon"] = strings.Join(paths, ",")
	if c.opts.Lang == "" {
		c.opts.Lang = m.Meta["voice"]
	}
	if c.opts.Lang == "" && len(paths) == 0 {
		return backends.Invalidf("sherpa: a multi-language Kokoro model needs option lexicon or lang (its metadata names no voice)")
	}
	if c.opts.Lang != "" && !espeakHasVoice(c.files["data_dir"], c.opts.Lang) {
		return backends.Invalidf("sherpa: option lang %q: data_dir has no espeak-ng voice of that name", c.opts.Lang)
	}
	have, err := c.tokenSet()
	if err != nil {
		return err
	}
	for _, p := range kokoroPunct {
		if !have[p] {
			return backends.Invalidf("sherpa: tokens has no %q (the multi-language front end needs every punctuation mark it knows)", p)
		}
	}
	c.voiceLangs = make([]string, c.speakers)
	for i := range c.voiceLangs {
		c.voiceLangs[i] = c.opts.Lang
		if n := c.speakerName(i); n != "" {
			if l, ok := kokoroLangs[n[0]]; ok && espeakHasVoice(c.files["data_dir"], l) {
				c.voiceLangs[i] = l
			}
		}
	}
	return nil
}

// espeakHasVoice reports whether espeak-ng-data dir has a voice file
// named name (case-insensitive) under lang/.
func espeakHasVoice(dir, name string) bool {
	found := false
	_ = filepath.WalkDir(filepath.Join(dir, "lang"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.EqualFold(d.Name(), name) {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}
