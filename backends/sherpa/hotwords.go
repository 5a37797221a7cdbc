package sherpa

import (
	"os"
	"strconv"
	"strings"
	"unicode"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// Hotwords (a request extension, field hotwords): phrases the decoder is
// biased toward. sherpa-onnx's transducers take them per stream
// (SherpaOnnxCreate{Offline,Online}StreamWithHotwords) with
// modified_beam_search; greedy search would build the phrases' context
// graph and then ignore it, and a phrase whose pieces are not tokens is
// skipped with a log line: both silent, so both are refused here with a
// 400 naming hotwords. Phrases are split into pieces by the model's
// modeling unit, as the library splits them: cjkchar (a run of ASCII
// letters, digits and apostrophes is one piece, any other character its
// own), bpe or cjkchar+bpe (bpe.go); a trailing ":SCORE" sets a phrase's
// score.

const (
	greedySearch = "greedy_search"
	beamSearch   = "modified_beam_search"
	// maxHotwords bounds the phrases of one request, and maxHotwordBytes
	// the field: cutting a word into BPE pieces tries every piece length
	// at every byte, so its cost is bounded before any of it is done.
	maxHotwords     = 64
	maxHotwordBytes = 4096
)

// asrInput is a recognizer's request input: AudioRequest's fields and the
// hotwords extension.
type asrInput struct {
	audio.AudioRequest
	Hotwords string `json:"hotwords,omitempty"`
}

// transducer reports whether the family is a transducer (the families
// with modified_beam_search and hotwords).
func (f family) transducer() bool {
	return f.name == FamilyTransducer || f.name == FamilyNemoTransducer || f.name == FamilyOnlineTransducer
}

// checkDecoding resolves decoding_method and hotwords_score.
func (c *config) checkDecoding() error {
	switch c.opts.DecodingMethod {
	case "":
		c.opts.DecodingMethod = greedySearch
	case greedySearch:
	case beamSearch:
		if !c.fam.transducer() {
			return backends.Invalidf("sherpa: option decoding_method %s: only the transducer families (%s, %s, %s) take it", beamSearch, FamilyTransducer, FamilyNemoTransducer, FamilyOnlineTransducer)
		}
	default:
		return backends.Invalidf("sherpa: option decoding_method %q: want %s or %s", c.opts.DecodingMethod, greedySearch, beamSearch)
	}
	if err := c.checkUnit(); err != nil {
		return err
	}
	if c.opts.HotwordsScore == 0 {
		c.opts.HotwordsScore = 1.5
	}
	if c.opts.HotwordsScore < 0 || c.opts.HotwordsScore > 100 {
		return backends.Invalidf("sherpa: option hotwords_score %g outside 0..100", c.opts.HotwordsScore)
	}
	return nil
}

// hotwordsFor checks a request's hotwords against the model and returns
// them in the library's per-stream form ("/" between phrases), "" for none.
func (c *config) hotwordsFor(hw string) (string, error) {
	if strings.TrimSpace(hw) == "" {
		return "", nil
	}
	if len(hw) > maxHotwordBytes {
		return "", backends.InvalidParam("hotwords", "sherpa: hotwords: %d bytes, more than %d", len(hw), maxHotwordBytes)
	}
	if !c.fam.transducer() {
		return "", backends.InvalidParam("hotwords", "sherpa: hotwords: model %s (family %s) has no hotword biasing; the transducer families with decoding_method %s do", c.name, c.fam.name, beamSearch)
	}
	if c.opts.DecodingMethod != beamSearch {
		return "", backends.InvalidParam("hotwords", "sherpa: hotwords: model %s decodes with %s, which ignores them; register it with option decoding_method %s", c.name, c.opts.DecodingMethod, beamSearch)
	}
	toks, err := c.tokenSet()
	if err != nil {
		return "", err
	}
	var phrases []string
	for _, line := range strings.Split(hw, "/") {
		words := strings.Fields(line)
		if len(words) == 0 {
			continue
		}
		if len(phrases) == maxHotwords {
			return "", backends.InvalidParam("hotwords", "sherpa: hotwords: more than %d phrases", maxHotwords)
		}
		for i, w := range words {
			if s, ok := strings.CutPrefix(w, ":"); ok {
				if f, err := strconv.ParseFloat(s, 32); err != nil || i != len(words)-1 || f < 0 || f > 100 {
					return "", backends.InvalidParam("hotwords", "sherpa: hotwords: %q: a score is :N (0..100) after its phrase", w)
				}
				continue
			}
			for _, p := range c.hotwordPieces(w) {
				if !toks[p] || p == "<unk>" {
					return "", backends.InvalidParam("hotwords", "sherpa: hotwords: %q (a piece of %q by modeling unit %s) is not a token of model %s (its phrases must spell with its tokens)", p, w, c.unit, c.name)
				}
			}
		}
		phrases = append(phrases, strings.Join(words, " "))
	}
	return strings.Join(phrases, "/"), nil
}

// cjkPieces splits a word as the cjkchar modeling unit does.
func cjkPieces(w string) []string {
	var out []string
	run := ""
	for _, r := range w {
		if r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'') {
			run += string(r)
			continue
		}
		if run != "" {
			out, run = append(out, run), ""
		}
		out = append(out, string(r))
	}
	if run != "" {
		out = append(out, run)
	}
	return out
}

// tokenSet reads the symbols of tokens.txt.
func (c *config) tokenSet() (map[string]bool, error) {
	b, err := os.ReadFile(c.files["tokens"])
	if err != nil {
		return nil, backends.Invalidf("sherpa: tokens: %v", err)
	}
	set := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			set[f[0]] = true
		}
	}
	return set, nil
}

// offlineStream creates a stream for a request, with its hotwords.
func (m *model) offlineStream(hw string) uintptr {
	if hw == "" {
		return m.lib.createOffStream(m.ptr)
	}
	p := native.CString(hw)
	defer native.Free(p)
	return m.lib.offStreamHw(m.ptr, p)
}

// onlineStream creates a streaming recognizer's stream, with hotwords.
func (m *model) onlineStream(hw string) uintptr {
	if hw == "" {
		return m.lib.createOnStream(m.ptr)
	}
	p := native.CString(hw)
	defer native.Free(p)
	return m.lib.onStreamHw(m.ptr, p)
}
