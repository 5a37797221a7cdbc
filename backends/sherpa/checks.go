package sherpa

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/backends"
)

// The checks of each family beyond its table (families.go): metadata
// values and their consistency with the files, the ones the library
// trusts without checking.

// checkFamily checks what is particular to the family beyond its table.
func (c *config) checkFamily() error {
	if err := c.checkDecoding(); err != nil {
		return err
	}
	switch c.fam.name {
	case FamilyVITS:
		m := c.infos["model"]
		c.rate = metaInt(m, "sample_rate")
		if c.rate < 8000 || c.rate > 48000 {
			return backends.Invalidf("sherpa: model: metadata sample_rate %d outside 8000..48000", c.rate)
		}
		c.speakers = max(1, metaInt(m, "n_speakers"))
		if c.speakers > 1 && !hasInput(m, "sid") {
			return backends.Invalidf("sherpa: model: metadata n_speakers %d but the graph has no sid input", c.speakers)
		}
		if c.files["data_dir"] == "" {
			return backends.Invalidf("sherpa: family vits (Piper) needs option data_dir (espeak-ng-data)")
		}
		if len(c.opts.Speakers) > 0 && len(c.opts.Speakers) != c.speakers {
			return backends.Invalidf("sherpa: option speakers names %d speakers, the model has %d", len(c.opts.Speakers), c.speakers)
		}
	case FamilyMatcha:
		m := c.infos["acoustic_model"]
		c.rate = metaInt(m, "sample_rate")
		if c.rate < 8000 || c.rate > 48000 {
			return backends.Invalidf("sherpa: acoustic_model: metadata sample_rate %d outside 8000..48000", c.rate)
		}
		if metaInt(m, "has_espeak") != 1 || m.Meta["voice"] == "zh en-us" || metaInt(m, "jieba") != 0 {
			return backends.Invalidf("sherpa: acoustic_model: only Matcha voices phonemized by espeak-ng (has_espeak 1) are served; lexicon and jieba ones are not yet")
		}
		if metaInt(m, "n_speakers") > 1 {
			return backends.Invalidf("sherpa: acoustic_model: multi-speaker Matcha models are not served")
		}
		c.speakers = 1
		if c.files["data_dir"] == "" {
			return backends.Invalidf("sherpa: family matcha needs option data_dir (espeak-ng-data)")
		}
		if err := checkVocoder(c.infos["vocoder"]); err != nil {
			return err
		}
	case FamilyKokoro:
		m := c.infos["model"]
		c.rate = metaInt(m, "sample_rate")
		if c.rate < 8000 || c.rate > 48000 {
			return backends.Invalidf("sherpa: model: metadata sample_rate %d outside 8000..48000", c.rate)
		}
		if v := metaInt(m, "version"); v > 2 {
			return backends.Invalidf("sherpa: model: Kokoro metadata version %d: versions 1 (kokoro-en-v0_19) and 2 (multi-language, lexicons) are served", v)
		}
		c.speakers = metaInt(m, "n_speakers")
		if c.speakers < 1 || c.speakers > 4096 {
			return backends.Invalidf("sherpa: model: metadata n_speakers %d outside 1..4096", c.speakers)
		}
		dims := strings.Split(m.Meta["style_dim"], ",")
		var d [3]int
		for i := range d {
			if len(dims) != 3 {
				break
			}
			d[i], _ = strconv.Atoi(strings.TrimSpace(dims[i]))
		}
		if len(dims) != 3 || d[0] < 2 || d[0] > 4096 || d[1] != 1 || d[2] < 1 || d[2] > 4096 {
			return backends.Invalidf("sherpa: model: metadata style_dim %q: want max_tokens,1,dim", m.Meta["style_dim"])
		}
		st, err := os.Stat(c.files["voices"])
		if err != nil {
			return backends.Invalidf("sherpa: voices: %v", err)
		}
		if want := int64(4 * d[0] * d[2] * c.speakers); st.Size() != want {
			return backends.Invalidf("sherpa: voices %s is %d bytes; style_dim %s x %d speakers is %d", c.opts.Voices, st.Size(), m.Meta["style_dim"], c.speakers, want)
		}
		if names := m.Meta["speaker_names"]; names != "" && len(c.opts.Speakers) == 0 {
			c.opts.Speakers = strings.Split(names, ",")
		}
		if len(c.opts.Speakers) > 0 && len(c.opts.Speakers) != c.speakers {
			return backends.Invalidf("sherpa: %d speaker names for %d speakers", len(c.opts.Speakers), c.speakers)
		}
		if c.files["data_dir"] == "" {
			return backends.Invalidf("sherpa: family kokoro needs option data_dir (espeak-ng-data)")
		}
		if err := c.checkKokoroMulti(); err != nil {
			return err
		}
	case FamilyNemoCTC:
		m := c.infos["model"]
		if v := metaInt(m, "vocab_size"); v != c.nTokens {
			return backends.Invalidf("sherpa: model: metadata vocab_size %d but tokens has %d", v, c.nTokens)
		}
		if s := metaInt(m, "subsampling_factor"); s < 1 || s > 64 {
			return backends.Invalidf("sherpa: model: metadata subsampling_factor %d outside 1..64", s)
		}
		c.rate = SampleRate
	case FamilySenseVoice:
		m := c.infos["model"]
		if v := metaInt(m, "vocab_size"); v != c.nTokens {
			return backends.Invalidf("sherpa: model: metadata vocab_size %d but tokens has %d", v, c.nTokens)
		}
		if err := checkLFR(m); err != nil {
			return err
		}
		for _, k := range []string{"with_itn", "without_itn", "lang_auto", "lang_zh", "lang_en", "lang_ja", "lang_ko", "lang_yue"} {
			if v := metaInt(m, k); v >= c.nTokens {
				return backends.Invalidf("sherpa: model: metadata %s = %d is not a token ID (%d tokens)", k, v, c.nTokens)
			}
		}
		switch l := c.opts.Language; {
		case l == "" || l == "auto":
			c.opts.Language = "auto"
		case !slices.Contains(senseVoiceLangs, l):
			return backends.Invalidf("sherpa: option language %q: SenseVoice takes auto, %s", l, strings.Join(senseVoiceLangs, ", "))
		}
		c.langs = append([]string{"auto"}, senseVoiceLangs...)
		c.rate = SampleRate
	case FamilyNemoTransducer:
		enc, dec, join := c.infos["encoder"], c.infos["decoder"], c.infos["joiner"]
		if mt := enc.Meta["model_type"]; mt != "EncDecRNNTBPEModel" && mt != "EncDecHybridRNNTCTCBPEModel" {
			return backends.Invalidf("sherpa: encoder: metadata model_type %q, want EncDecRNNTBPEModel or EncDecHybridRNNTCTCBPEModel", mt)
		}
		vocab := metaInt(enc, "vocab_size") + 1 // NeMo's vocab_size leaves the blank out
		if vocab != c.nTokens {
			return backends.Invalidf("sherpa: encoder: metadata vocab_size %d (+1 blank) but tokens has %d", vocab-1, c.nTokens)
		}
		if f, ok := enc.Meta["feat_dim"]; ok && f != "80" && f != "128" && f != "-1" {
			return backends.Invalidf("sherpa: encoder: metadata feat_dim %s, want 80 or 128", f)
		}
		if l, h := metaInt(enc, "pred_rnn_layers"), metaInt(enc, "pred_hidden"); l < 1 || l > 16 || h < 1 || h > 8192 {
			return backends.Invalidf("sherpa: encoder: metadata pred_rnn_layers %d and pred_hidden %d out of range", l, h)
		}
		switch {
		case len(enc.Inputs) != 2 || len(enc.Outputs) < 2:
			return backends.Invalidf("sherpa: encoder: %d inputs and %d outputs, want audio and length in, outputs and lengths out", len(enc.Inputs), len(enc.Outputs))
		case len(dec.Inputs) != 4 || len(dec.Outputs) != 4:
			return backends.Invalidf("sherpa: decoder: %d inputs and %d outputs, want targets, length and two LSTM states in and out", len(dec.Inputs), len(dec.Outputs))
		case len(join.Inputs) != 2 || len(join.Outputs) < 1:
			return backends.Invalidf("sherpa: joiner: %d inputs, want encoder and decoder outputs", len(join.Inputs))
		}
		// The library reads the joiner's declared output size and exits
		// unless it is the vocabulary (RNNT) or the vocabulary plus the
		// durations (TDT: metadata url names tdt).
		dims := join.OutDims[join.Outputs[0]]
		out := int64(-1)
		if len(dims) > 0 {
			out = dims[len(dims)-1]
		}
		tdt := strings.Contains(enc.Meta["url"], "tdt")
		switch {
		case out < 1:
			return backends.Invalidf("sherpa: joiner: its output's last dimension is not declared (the library reads it)")
		case tdt && out <= int64(vocab):
			return backends.Invalidf("sherpa: joiner: a TDT model's output (%d) must hold the %d tokens and the durations", out, vocab)
		case !tdt && out != int64(vocab):
			return backends.Invalidf("sherpa: joiner: output size %d, the vocabulary is %d", out, vocab)
		}
		c.rate = SampleRate
	case FamilyDiarization:
		seg, emb := c.infos["segmentation"], c.infos["embedding"]
		if metaInt(seg, "sample_rate") != SampleRate || metaInt(emb, "sample_rate") != SampleRate {
			return backends.Invalidf("sherpa: segmentation and embedding: metadata sample_rate %d and %d, want %d", metaInt(seg, "sample_rate"), metaInt(emb, "sample_rate"), SampleRate)
		}
		win, rf, shift := metaInt(seg, "window_size"), metaInt(seg, "receptive_field_size"), metaInt(seg, "receptive_field_shift")
		if win < SampleRate || win > 60*SampleRate || rf < 1 || rf > win || shift < 1 || shift > win {
			return backends.Invalidf("sherpa: segmentation: metadata window_size %d, receptive_field_size %d, receptive_field_shift %d are inconsistent", win, rf, shift)
		}
		// The powerset classes: every set of at most powerset_max_classes
		// of num_speakers speakers; the library indexes its mapping by
		// the model's class without checking.
		ns, pm := metaInt(seg, "num_speakers"), metaInt(seg, "powerset_max_classes")
		want, binom := 0, 1
		for k := 0; k <= pm && k <= ns; k++ {
			if k > 0 {
				binom = binom * (ns - k + 1) / k
			}
			want += binom
		}
		if ns < 1 || ns > 8 || pm < 1 || pm > ns || metaInt(seg, "num_classes") != want {
			return backends.Invalidf("sherpa: segmentation: metadata num_classes %d; %d speakers at most %d at once make %d", metaInt(seg, "num_classes"), ns, pm, want)
		}
		if fw := emb.Meta["framework"]; fw != "3d-speaker" && fw != "wespeaker" {
			return backends.Invalidf("sherpa: embedding: metadata framework %q, want 3d-speaker or wespeaker (NeMo's extractors are not served)", fw)
		}
		if d := metaInt(emb, "output_dim"); d < 1 || d > 8192 {
			return backends.Invalidf("sherpa: embedding: metadata output_dim %d outside 1..8192", d)
		}
		if c.opts.Threshold == 0 {
			c.opts.Threshold = 0.5
		}
		if c.opts.MinDurationOn == 0 {
			c.opts.MinDurationOn = 0.3
		}
		if c.opts.MinDurationOff == 0 {
			c.opts.MinDurationOff = 0.5
		}
		if c.opts.Threshold < 0 || c.opts.Threshold > 2 || c.opts.MinDurationOn < 0 || c.opts.MinDurationOn > 10 || c.opts.MinDurationOff < 0 || c.opts.MinDurationOff > 10 {
			return backends.Invalidf("sherpa: threshold in 0..2, min_duration_on and min_duration_off in 0..10 s")
		}
		c.rate = SampleRate
	case FamilyCanary:
		enc, dec := c.infos["encoder"], c.infos["decoder"]
		if mt := enc.Meta["model_type"]; mt != "EncDecMultiTaskModel" {
			return backends.Invalidf("sherpa: encoder: metadata model_type %q, want EncDecMultiTaskModel", mt)
		}
		if v := metaInt(enc, "vocab_size"); v != c.nTokens {
			return backends.Invalidf("sherpa: encoder: metadata vocab_size %d but tokens has %d (the library exits on it)", v, c.nTokens)
		}
		if f := metaInt(enc, "feat_dim"); f != 80 && f != 128 {
			return backends.Invalidf("sherpa: encoder: metadata feat_dim %d, want 80 or 128", f)
		}
		layers := 6
		if v, ok := enc.Meta["num_decoder_layers"]; ok {
			layers, _ = strconv.Atoi(v)
		}
		if layers < 1 || layers > 64 {
			return backends.Invalidf("sherpa: encoder: metadata num_decoder_layers %d outside 1..64", layers)
		}
		switch {
		case len(enc.Inputs) != 2 || len(enc.Outputs) != 3:
			return backends.Invalidf("sherpa: encoder: %d inputs and %d outputs, want features and length in, states, length and mask out", len(enc.Inputs), len(enc.Outputs))
		case len(dec.Inputs) != 3+layers || len(dec.Outputs) != 1+layers:
			return backends.Invalidf("sherpa: decoder: %d inputs and %d outputs; %d decoder layers need %d and %d", len(dec.Inputs), len(dec.Outputs), layers, 3+layers, 1+layers)
		}
		have, err := c.tokenSet()
		if err != nil {
			return err
		}
		for _, t := range canaryTokens {
			if !have[t] {
				return backends.Invalidf("sherpa: tokens has no %s (Canary's prompt needs it)", t)
			}
		}
		switch l := c.opts.Language; {
		case l == "" || l == "auto":
			c.opts.Language = "en"
		case !slices.Contains([]string{"en", "es", "de", "fr"}, l):
			return backends.Invalidf("sherpa: option language %q: Canary takes en, es, de, fr", l)
		}
		c.langs = []string{"en", "es", "de", "fr"}
		c.rate = SampleRate
	case FamilyMoonshine:
		// The library feeds the models positionally: audio; features and
		// their length; tokens, encoder_out and seq_len, then (cached) the
		// states the uncached decoder returned after its logits.
		pre, enc, un, ca := c.infos["preprocessor"], c.infos["encoder"], c.infos["uncached_decoder"], c.infos["cached_decoder"]
		switch {
		case len(pre.Inputs) != 1:
			return backends.Invalidf("sherpa: preprocessor: %d inputs, want the audio alone", len(pre.Inputs))
		case len(enc.Inputs) != 2:
			return backends.Invalidf("sherpa: encoder: %d inputs, want features and features_len", len(enc.Inputs))
		case len(un.Inputs) != 3 || len(un.Outputs) < 2:
			return backends.Invalidf("sherpa: uncached_decoder: %d inputs and %d outputs, want 3 and logits plus states", len(un.Inputs), len(un.Outputs))
		case len(ca.Inputs) != 3+len(un.Outputs)-1 || len(ca.Outputs) != len(un.Outputs):
			return backends.Invalidf("sherpa: cached_decoder: %d inputs and %d outputs; the uncached decoder's %d states need %d and %d", len(ca.Inputs), len(ca.Outputs), len(un.Outputs)-1, 3+len(un.Outputs)-1, len(un.Outputs))
		}
		c.rate = SampleRate
	case FamilyWhisper:
		m := c.infos["encoder"]
		if n := metaInt(m, "n_mels"); n != 80 && n != 128 {
			return backends.Invalidf("sherpa: encoder: metadata n_mels %d, want 80 or 128", n)
		}
		if ctx := metaInt(m, "n_text_ctx"); ctx < 4 || ctx > 4096 {
			return backends.Invalidf("sherpa: encoder: metadata n_text_ctx %d outside 4..4096", ctx)
		}
		if err := c.base64Tokens(); err != nil {
			return err
		}
		multi := metaInt(m, "is_multilingual") != 0
		sot := strings.Split(m.Meta["sot_sequence"], ",")
		if _, err := intList(m.Meta["sot_sequence"]); err != nil || multi && len(sot) < 3 {
			// The decoder writes the language and the task into
			// sot_sequence[1] and [2] of a multilingual model.
			return backends.Invalidf("sherpa: encoder: metadata sot_sequence %q: want token IDs (3 for a multilingual model)", m.Meta["sot_sequence"])
		}
		langs := []string{"en"}
		if multi {
			codes, toks := strings.Split(m.Meta["all_language_codes"], ","), m.Meta["all_language_tokens"]
			n, err := intList(toks)
			if err != nil || n != len(codes) {
				return backends.Invalidf("sherpa: encoder: metadata all_language_tokens and all_language_codes must list as many (the library exits otherwise)")
			}
			// A request may pick any of them (langs.go): each must be a
			// token of the decoder's vocabulary.
			for _, t := range strings.Split(toks, ",") {
				if v, _ := strconv.Atoi(strings.TrimSpace(t)); v >= metaInt(m, "n_vocab") {
					return backends.Invalidf("sherpa: encoder: metadata all_language_tokens: %d is not below n_vocab %d", v, metaInt(m, "n_vocab"))
				}
			}
			langs = codes
		}
		switch l := c.opts.Language; {
		case l == "" || l == "auto":
			c.opts.Language = "auto"
			if !multi {
				c.opts.Language = "en"
			}
		case !slices.Contains(langs, l):
			return backends.Invalidf("sherpa: option language %q is not one of the model's (%s)", l, strings.Join(langs, ", "))
		}
		c.langs = langs
		if multi {
			c.langs = append([]string{"auto"}, langs...)
		}
		if c.opts.MaxSeconds > 30 {
			// The library decodes the first 30 s and drops the rest.
			if c.opts.maxSecondsSet {
				return backends.Invalidf("sherpa: max_seconds %d: Whisper decodes at most 30 s", c.opts.MaxSeconds)
			}
			c.opts.MaxSeconds = 30
		}
		c.rate = SampleRate
	case FamilyParaformer:
		m := c.infos["model"]
		if v := metaInt(m, "vocab_size"); v != c.nTokens {
			return backends.Invalidf("sherpa: model: metadata vocab_size %d but tokens has %d", v, c.nTokens)
		}
		if err := checkLFR(m); err != nil {
			return err
		}
		if len(m.Outputs) < 2 || len(m.Outputs) == 3 {
			// With more than two, the library reads the fourth as
			// us_cif_peak (the token times).
			return backends.Invalidf("sherpa: model: Paraformer's graph has %d outputs, want logits and token_num (and us_alphas and us_cif_peak)", len(m.Outputs))
		}
		// The greedy search looks </s> up unchecked.
		b, err := os.ReadFile(c.files["tokens"])
		if err != nil || !strings.Contains("\n"+string(b), "\n</s> ") {
			return backends.Invalidf("sherpa: tokens has no </s> (Paraformer's end of sentence)")
		}
		c.rate = SampleRate
	case FamilyTransducer, FamilyOnlineTransducer:
		enc, dec := c.infos["encoder"], c.infos["decoder"]
		if v := metaInt(dec, "vocab_size"); v != c.nTokens {
			return backends.Invalidf("sherpa: decoder: metadata vocab_size %d but tokens has %d", v, c.nTokens)
		}
		if cs := metaInt(dec, "context_size"); cs < 1 || cs > 8 {
			return backends.Invalidf("sherpa: decoder: metadata context_size %d outside 1..8", cs)
		}
		c.rate = SampleRate
		if c.fam.name == FamilyTransducer {
			switch mt := enc.Meta["model_type"]; {
			case mt == "conformer" || mt == "zipformer" || mt == "zipformer2":
			default:
				return backends.Invalidf("sherpa: encoder: metadata model_type %q: the offline transducer takes conformer, zipformer or zipformer2 (icefall's exports)", mt)
			}
			if _, ok := enc.Meta["decode_chunk_len"]; ok {
				return backends.Invalidf("sherpa: encoder: a streaming export (it has decode_chunk_len): use family %s", FamilyOnlineTransducer)
			}
			break
		}
		if t, ch := metaInt(enc, "T"), metaInt(enc, "decode_chunk_len"); ch < 1 || t < ch || t > 4096 {
			return backends.Invalidf("sherpa: encoder: metadata T %d and decode_chunk_len %d: want 1 <= decode_chunk_len <= T <= 4096", t, ch)
		}
		// The per-stack lists must be comma-separated integers of one
		// length: the library indexes each by the stack without checking.
		stacks := -1
		for _, k := range []string{"num_encoder_layers", "encoder_dims", "cnn_module_kernels", "left_context_len", "query_head_dims", "value_head_dims", "num_heads"} {
			n, err := intList(enc.Meta[k])
			if err != nil {
				return backends.Invalidf("sherpa: encoder: metadata %s = %q: %v", k, enc.Meta[k], err)
			}
			if stacks >= 0 && n != stacks {
				return backends.Invalidf("sherpa: encoder: metadata %s has %d entries, num_encoder_layers %d", k, n, stacks)
			}
			stacks = n
		}
		c.rate = SampleRate
	default:
		return c.checkMoreFamilies()
	}
	return nil
}

// checkLFR checks the low-frame-rate and CMVN metadata of SenseVoice and
// Paraformer: the library stacks lfr_window_size frames every
// lfr_window_shift and applies neg_mean and inv_stddev over 80 x
// lfr_window_size dimensions without checking their length.
func checkLFR(m onnxInfo) error {
	win, shift := metaInt(m, "lfr_window_size"), metaInt(m, "lfr_window_shift")
	if win < 1 || win > 32 || shift < 1 || shift > win {
		return backends.Invalidf("sherpa: model: metadata lfr_window_size %d and lfr_window_shift %d: want 1 <= shift <= size <= 32", win, shift)
	}
	for _, k := range []string{"neg_mean", "inv_stddev"} {
		if n := len(strings.Split(m.Meta[k], ",")); n != 80*win {
			return backends.Invalidf("sherpa: model: metadata %s has %d values, want 80 x lfr_window_size = %d", k, n, 80*win)
		}
		for _, f := range strings.Split(m.Meta[k], ",") {
			if _, err := strconv.ParseFloat(strings.TrimSpace(f), 32); err != nil {
				return backends.Invalidf("sherpa: model: metadata %s: %q is not a number", k, f)
			}
		}
	}
	return nil
}

// intList parses "a,b,c" (positive integers below 1<<16) and returns
// their count.
func intList(s string) (int, error) {
	parts := strings.Split(s, ",")
	for _, p := range parts {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 1 || v >= 1<<16 {
			return 0, fmt.Errorf("not a list of positive integers")
		}
	}
	return len(parts), nil
}
