package sherpa

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/backends"
)

// A transducer trained on sentencepiece BPE pieces (icefall's English
// zipformers: tokens such as "▁THE", "S") spells a hotword with those
// pieces, not character by character. sherpa-onnx takes the pieces'
// vocabulary as a text file (option bpe_vocab, "bpe.vocab": one "piece
// score" per line, as sherpa-onnx's export_bpe_vocab.py writes it from
// bpe.model) and the modeling unit bpe or cjkchar+bpe; its encoder (the
// simple-sentencepiece library) splits "▁" + word into the pieces whose
// scores add up highest.
//
// That encoder ends the process (exit) on a line that is not a piece and
// a decimal score, an empty line included, and reads past its table when
// a byte-fallback vocabulary (one with <0x00>) lacks any of the 256 byte
// pieces; readBpeVocab refuses all of these (CONTRACT.md
// engine.load-safety). And a hotword piece missing from tokens.txt is
// skipped with a log line, so a request's hotwords are encoded here, the
// library's way, and refused naming hotwords unless every piece is a
// token.

const (
	// maxBpeVocabBytes and maxBpeVocabLines bound the vocabulary file
	// (real ones: 500 to 15,000 pieces, under 300 KB).
	maxBpeVocabBytes = 16 << 20
	maxBpeVocabLines = 1 << 20
	// maxBpePiece bounds a piece's length in bytes (the encoder tries
	// every piece length at every byte of a word).
	maxBpePiece = 64
	// unitCJK, unitBPE and unitCJKBPE are the modeling units.
	unitCJK    = "cjkchar"
	unitBPE    = "bpe"
	unitCJKBPE = "cjkchar+bpe"
)

// decimal is what a C++ stream reads as a float: no hex, inf or nan.
var decimal = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// bpeVocab is a sentencepiece vocabulary as the encoder reads it.
type bpeVocab struct {
	score    map[string]float32
	maxLen   int  // the longest piece, in bytes
	fallback bool // <0x00>..<0xFF> present: unknown bytes become byte pieces
}

// readBpeVocab reads and checks a bpe.vocab file.
func readBpeVocab(path string) (*bpeVocab, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, backends.Invalidf("sherpa: bpe_vocab: %v", err)
	}
	if st.Size() > maxBpeVocabBytes {
		return nil, backends.Invalidf("sherpa: bpe_vocab: %d bytes, more than %d", st.Size(), maxBpeVocabBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, backends.Invalidf("sherpa: bpe_vocab: %v", err)
	}
	return parseBpeVocab(b)
}

// parseBpeVocab parses a bpe.vocab file's bytes.
func parseBpeVocab(b []byte) (*bpeVocab, error) {
	v := &bpeVocab{score: map[string]float32{}}
	var pieces []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxBpeVocabBytes)
	for n := 1; sc.Scan(); n++ {
		if n > maxBpeVocabLines {
			return nil, backends.Invalidf("sherpa: bpe_vocab: more than %d lines", maxBpeVocabLines)
		}
		f := strings.Fields(sc.Text())
		if len(f) != 2 || !decimal.MatchString(f[1]) {
			return nil, backends.Invalidf("sherpa: bpe_vocab: line %d %.40q: want a piece and its score", n, sc.Text())
		}
		s, err := strconv.ParseFloat(f[1], 32)
		if err != nil || math.IsInf(s, 0) {
			return nil, backends.Invalidf("sherpa: bpe_vocab: line %d: score %q is not a float", n, f[1])
		}
		if len(f[0]) > maxBpePiece {
			return nil, backends.Invalidf("sherpa: bpe_vocab: line %d: a piece of %d bytes, more than %d", n, len(f[0]), maxBpePiece)
		}
		if _, dup := v.score[f[0]]; dup {
			return nil, backends.Invalidf("sherpa: bpe_vocab: line %d: piece %q again", n, f[0])
		}
		v.score[f[0]] = float32(s)
		v.maxLen = max(v.maxLen, len(f[0]))
		pieces = append(pieces, f[0])
	}
	if err := sc.Err(); err != nil {
		return nil, backends.Invalidf("sherpa: bpe_vocab: %v", err)
	}
	if len(pieces) == 0 {
		return nil, backends.Invalidf("sherpa: bpe_vocab: no pieces")
	}
	for i, p := range pieces {
		if p != "<0x00>" {
			continue
		}
		if len(pieces)-i < 256 {
			return nil, backends.Invalidf("sherpa: bpe_vocab: <0x00> starts the byte pieces, but fewer than 256 lines follow")
		}
		for k := range 256 {
			if want := bytePiece(byte(k)); pieces[i+k] != want {
				return nil, backends.Invalidf("sherpa: bpe_vocab: byte piece %d is %q, want %s", k, pieces[i+k], want)
			}
		}
		v.fallback = true
		break
	}
	return v, nil
}

// bytePiece names a byte's fallback piece.
func bytePiece(b byte) string { return fmt.Sprintf("<0x%02X>", b) }

// encode splits one word into pieces as the library's encoder does:
// "▁" + word, cut where the pieces' scores add up highest (a tie keeps
// the shorter piece); a byte no piece covers becomes <unk>, or its byte
// piece in a byte-fallback vocabulary.
func (v *bpeVocab) encode(word string) []string {
	s := "\u2581" + word
	n := len(s)
	best := make([]float32, n+1)
	next := make([]int, n+1)
	for i := n - 1; i >= 0; i-- {
		top, to := float32(math.Inf(-1)), -1
		for l := 1; l <= v.maxLen && i+l <= n; l++ {
			sc, ok := v.score[s[i:i+l]]
			if !ok {
				continue
			}
			if t := sc + best[i+l]; t > top {
				top, to = t, i+l
			}
		}
		if to < 0 {
			top = 0
		}
		best[i], next[i] = top, to
	}
	var out []string
	for i := 0; i < n; {
		if next[i] < 0 {
			p := "<unk>"
			if v.fallback {
				p = bytePiece(s[i])
			}
			out = append(out, p)
			i++
			continue
		}
		out = append(out, s[i:next[i]])
		i = next[i]
	}
	return out
}

// hotwordPieces splits one word of a hotword phrase into the tokens the
// library looks up, by the model's modeling unit.
func (c *config) hotwordPieces(w string) []string {
	switch c.unit {
	case unitBPE:
		return c.bpe.encode(w)
	case unitCJKBPE:
		var out []string
		for _, p := range cjkPieces(w) {
			if r := p[0]; r < 0x80 && (r|0x20 >= 'a' && r|0x20 <= 'z') {
				out = append(out, c.bpe.encode(p)...)
				continue
			}
			out = append(out, p)
		}
		return out
	}
	return cjkPieces(w)
}

// checkUnit resolves modeling_unit against bpe_vocab.
func (c *config) checkUnit() error {
	u := c.opts.ModelingUnit
	if (u != "" || c.bpe != nil) && !c.fam.transducer() {
		return backends.Invalidf("sherpa: options modeling_unit and bpe_vocab: only the transducer families (%s, %s, %s) take them", FamilyTransducer, FamilyNemoTransducer, FamilyOnlineTransducer)
	}
	switch u {
	case "":
		u = unitCJK
		if c.bpe != nil {
			u = unitBPE
		}
	case unitCJK:
	case unitBPE, unitCJKBPE:
		if c.bpe == nil {
			return backends.Invalidf("sherpa: option modeling_unit %s needs option bpe_vocab (the pieces' bpe.vocab)", u)
		}
	default:
		return backends.Invalidf("sherpa: option modeling_unit %q: want %s, %s or %s", u, unitCJK, unitBPE, unitCJKBPE)
	}
	c.unit = u
	return nil
}
