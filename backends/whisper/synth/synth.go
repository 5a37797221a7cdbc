// Package synth writes ggml Whisper model files (the format whisper.cpp
// 1.5.0 loads: magic, hyperparameters, mel filters, vocabulary, tensors)
// with seeded random weights. No real Whisper weights can be obtained from
// the package registries Sluice builds from, so the tests and benchmarks
// run the real library on these: the layout, the shapes and the code paths
// are the real ones; the transcripts are meaningless words from a
// synthetic vocabulary. The same seed and dims always give the same bytes.
//
// Threading rule: every function is safe for concurrent use.
package synth

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
)

// Magic is ggml's file magic ("ggml" as a little-endian uint32).
const Magic = 0x67676d6c

// Whisper's fixed audio front end: 80 mel bands (128 in large-v3 and
// large-v3-turbo: Dims.Mels) over a 400-point FFT (201 bins), 1500 encoder
// positions for a 30 s window.
const (
	Mels     = 80
	Mels128  = 128
	FFTBins  = 201
	AudioCtx = 1500
	// TextVocab is the number of text tokens the file lists (the GPT-2
	// sized vocabulary plus end-of-text); the loader adds the special,
	// language and timestamp tokens up to Dims.Vocab.
	TextVocab = 50257
	// Vocab is the multilingual vocabulary size (99 languages).
	Vocab = 51865
	// VocabV3 is large-v3's vocabulary (100 languages, Cantonese added).
	VocabV3 = 51866
	// VocabEn is the English-only models' vocabulary (tiny.en ... medium.en).
	VocabEn = 51864
)

// Dims are a model's hyperparameters. AudioState is also the text state
// (whisper.cpp requires them equal).
type Dims struct {
	State, Heads       int // per layer
	AudioLayers        int
	TextLayers         int
	TextCtx            int // the decoder's context; whisper.cpp decodes at most TextCtx/2-4 tokens per 30 s window
	Name               string
	ZeroEndOfTextLogit bool // the end-of-text token's embedding is zero: decoding runs to the window's token limit
	Mels               int  // mel bands: 0 or 80, or 128 (large-v3's front end)
	Vocab              int  // 0: Vocab (multilingual); VocabV3 as large-v3; VocabEn English-only
	F32                bool // the matrices as 32-bit floats (ftype 0) instead of 16-bit (ftype 1)
}

func (d Dims) mels() int {
	if d.Mels == 0 {
		return Mels
	}
	return d.Mels
}

func (d Dims) vocab() int {
	if d.Vocab == 0 {
		return Vocab
	}
	return d.Vocab
}

// Tiny is the make-test model: 6.9 MB, about a second per short clip on
// one thread.
var Tiny = Dims{Name: "tiny", State: 64, Heads: 2, AudioLayers: 2, TextLayers: 2, TextCtx: 64, ZeroEndOfTextLogit: true}

// Bench is the benchmark model: 14 MB, several times Tiny's work per window.
var Bench = Dims{Name: "bench", State: 128, Heads: 2, AudioLayers: 3, TextLayers: 3, TextCtx: 128, ZeroEndOfTextLogit: true}

// Tiny128 is Tiny with large-v3's front end: 128 mel bands and the
// 51866-token vocabulary.
var Tiny128 = Dims{Name: "tiny-128", State: 64, Heads: 2, AudioLayers: 2, TextLayers: 2, TextCtx: 64, ZeroEndOfTextLogit: true, Mels: Mels128, Vocab: VocabV3}

// Check reports dims that whisper.cpp could not load.
func (d Dims) Check() error {
	switch {
	case d.State < 8 || d.State > 4096 || d.Heads < 1 || d.State%d.Heads != 0:
		return fmt.Errorf("synth: state %d with %d heads", d.State, d.Heads)
	case d.AudioLayers < 1 || d.AudioLayers > 64 || d.TextLayers < 1 || d.TextLayers > 64:
		return fmt.Errorf("synth: layers %d/%d outside 1..64", d.AudioLayers, d.TextLayers)
	case d.TextCtx < 16 || d.TextCtx > 448:
		return fmt.Errorf("synth: text context %d outside 16..448", d.TextCtx)
	case d.mels() != Mels && d.mels() != Mels128:
		return fmt.Errorf("synth: %d mel bands, want 80 or 128", d.Mels)
	case d.vocab() != Vocab && d.vocab() != VocabV3 && d.vocab() != VocabEn:
		return fmt.Errorf("synth: vocabulary %d, want %d, %d or %d", d.Vocab, Vocab, VocabV3, VocabEn)
	}
	return nil
}

// Tensor is one tensor of the file: its name and its ggml shape (ne[0]
// first) and whether it is stored as 16-bit floats.
type Tensor struct {
	Name string
	Ne   []int
	F16  bool
}

// Hparams are the hyperparameters a model file starts with, in file order.
type Hparams struct {
	Vocab, AudioCtx, AudioState, AudioHead, AudioLayer int32
	TextCtx, TextState, TextHead, TextLayer, Mels      int32
	Ftype                                              int32 // 0: f32, 1: f16 for the matrices (quantized files: 1000*version + ggml ftype)
}

// Hparams returns d's hyperparameters (f16 matrices unless d.F32).
func (d Dims) Hparams() Hparams {
	ftype := int32(1)
	if d.F32 {
		ftype = 0
	}
	return Hparams{int32(d.vocab()), AudioCtx, int32(d.State), int32(d.Heads), int32(d.AudioLayers),
		int32(d.TextCtx), int32(d.State), int32(d.Heads), int32(d.TextLayers), int32(d.mels()), ftype}
}

// Tensors lists the tensors of a model with hyperparameters h in the order
// Write writes them, with the shapes whisper.cpp 1.5.0 expects (the conv
// biases as [1, state]: the loader repeats them along the time axis). F16
// marks the matrices, stored as 16-bit floats when h.Ftype is 1.
func Tensors(h Hparams) []Tensor {
	s := int(h.AudioState)
	t := []Tensor{
		{"encoder.positional_embedding", []int{s, int(h.AudioCtx)}, false},
		{"encoder.conv1.weight", []int{3, int(h.Mels), s}, true},
		{"encoder.conv1.bias", []int{1, s}, false},
		{"encoder.conv2.weight", []int{3, s, s}, true},
		{"encoder.conv2.bias", []int{1, s}, false},
		{"encoder.ln_post.weight", []int{s}, false},
		{"encoder.ln_post.bias", []int{s}, false},
	}
	block := func(prefix string, cross bool) {
		add := func(name string, ne []int, f16 bool) { t = append(t, Tensor{prefix + name, ne, f16}) }
		add("mlp_ln.weight", []int{s}, false)
		add("mlp_ln.bias", []int{s}, false)
		add("mlp.0.weight", []int{s, 4 * s}, true)
		add("mlp.0.bias", []int{4 * s}, false)
		add("mlp.2.weight", []int{4 * s, s}, true)
		add("mlp.2.bias", []int{s}, false)
		attn := func(a string) {
			add(a+"_ln.weight", []int{s}, false)
			add(a+"_ln.bias", []int{s}, false)
			add(a+".query.weight", []int{s, s}, true)
			add(a+".query.bias", []int{s}, false)
			add(a+".key.weight", []int{s, s}, true)
			add(a+".value.weight", []int{s, s}, true)
			add(a+".value.bias", []int{s}, false)
			add(a+".out.weight", []int{s, s}, true)
			add(a+".out.bias", []int{s}, false)
		}
		attn("attn")
		if cross {
			attn("cross_attn")
		}
	}
	for i := range int(h.AudioLayer) {
		block("encoder.blocks."+strconv.Itoa(i)+".", false)
	}
	t = append(t,
		Tensor{"decoder.positional_embedding", []int{s, int(h.TextCtx)}, false},
		Tensor{"decoder.token_embedding.weight", []int{s, int(h.Vocab)}, true},
		Tensor{"decoder.ln.weight", []int{s}, false},
		Tensor{"decoder.ln.bias", []int{s}, false},
	)
	for i := range int(h.TextLayer) {
		block("decoder.blocks."+strconv.Itoa(i)+".", true)
	}
	return t
}

// Token returns the synthetic vocabulary's token id: pronounceable ASCII
// syllables, four in five starting a word (a leading space, as Whisper's
// byte-level tokens do), the rest continuing one. As in GPT-2's
// vocabulary, id 220 is a lone space (whisper.cpp's blank suppression
// looks it up) and 50256 is empty (the multilingual vocabulary's).
func Token(id int) string {
	switch id {
	case TextVocab - 1:
		return ""
	case 220:
		return " "
	}
	const cons, vows = "bdfgklmnprstvz", "aeiou"
	var b []byte
	if id%5 != 0 {
		b = append(b, ' ')
	}
	n := id
	for k := 0; k < 2 || n > 0; k++ {
		b = append(b, cons[n%len(cons)], vows[(n/len(cons))%len(vows)])
		n /= len(cons) * len(vows)
	}
	return string(b)
}

// MelFilters returns whisper's mels x 201 triangular mel filterbank (Slaney
// scale, area-normalised, as librosa computes it for 16 kHz and n_fft 400;
// mels is 80, or 128 for large-v3).
func MelFilters(mels int) []float32 {
	const sr, nfft = 16000.0, 400
	hzToMel := func(f float64) float64 {
		if f < 1000 {
			return 3 * f / 200
		}
		return 15 + 27*math.Log(f/1000)/math.Log(6.4)
	}
	melToHz := func(m float64) float64 {
		if m < 15 {
			return 200 * m / 3
		}
		return 1000 * math.Exp(math.Log(6.4)*(m-15)/27)
	}
	lo, hi := hzToMel(0), hzToMel(sr/2)
	pts := make([]float64, mels+2)
	for i := range pts {
		pts[i] = melToHz(lo + (hi-lo)*float64(i)/float64(mels+1))
	}
	out := make([]float32, mels*FFTBins)
	for m := range mels {
		l, c, r := pts[m], pts[m+1], pts[m+2]
		norm := 2 / (r - l)
		for k := range FFTBins {
			f := float64(k) * sr / nfft
			w := math.Max(0, math.Min((f-l)/(c-l), (r-f)/(r-c)))
			out[m*FFTBins+k] = float32(w * norm)
		}
	}
	return out
}

// Write writes the model file of d with weights drawn from seed.
func Write(w io.Writer, d Dims, seed uint64) error {
	if err := d.Check(); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	le := func(vs ...int32) {
		for _, v := range vs {
			_ = binary.Write(bw, binary.LittleEndian, v)
		}
	}
	h := d.Hparams()
	le(Magic, h.Vocab, h.AudioCtx, h.AudioState, h.AudioHead, h.AudioLayer,
		h.TextCtx, h.TextState, h.TextHead, h.TextLayer, h.Mels, h.Ftype)
	le(h.Mels, FFTBins)
	_ = binary.Write(bw, binary.LittleEndian, MelFilters(int(h.Mels)))
	le(TextVocab)
	for id := range TextVocab {
		tok := Token(id)
		le(int32(len(tok)))
		_, _ = bw.WriteString(tok)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5c1ce))
	for _, t := range Tensors(h) {
		f16 := t.F16 && !d.F32
		ttype := int32(0)
		if f16 {
			ttype = 1
		}
		le(int32(len(t.Ne)), int32(len(t.Name)), ttype)
		n := 1
		for _, x := range t.Ne {
			le(int32(x))
			n *= x
		}
		_, _ = bw.WriteString(t.Name)
		vals := values(t, n, d, rng)
		if f16 {
			buf := make([]byte, 2*n)
			for i, v := range vals {
				binary.LittleEndian.PutUint16(buf[2*i:], F16(v))
			}
			_, _ = bw.Write(buf)
		} else {
			_ = binary.Write(bw, binary.LittleEndian, vals)
		}
	}
	return bw.Flush()
}

// Bytes returns the model file of d with weights drawn from seed.
func Bytes(d Dims, seed uint64) ([]byte, error) {
	var b bytes.Buffer
	if err := Write(&b, d, seed); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// values draws a tensor's contents: layer norms at weight 1 and bias 0,
// sinusoidal encoder positions (as Whisper has), and the rest normal with
// the 1/sqrt(fan-in) scale that keeps activations bounded.
func values(t Tensor, n int, d Dims, rng *rand.Rand) []float32 {
	out := make([]float32, n)
	name := t.Name
	switch {
	case hasSuffix(name, "ln.weight") || hasSuffix(name, "ln_post.weight"):
		for i := range out {
			out[i] = 1
		}
	case hasSuffix(name, "ln.bias") || hasSuffix(name, "ln_post.bias"):
	case name == "encoder.positional_embedding":
		half := d.State / 2
		for p := range AudioCtx {
			for i := range half {
				f := float64(p) * math.Exp(-math.Log(10000)*float64(i)/float64(max(1, half-1)))
				out[p*d.State+i] = float32(math.Sin(f))
				out[p*d.State+half+i] = float32(math.Cos(f))
			}
		}
	default:
		scale := 1 / math.Sqrt(float64(t.Ne[0]))
		if hasSuffix(name, ".bias") {
			scale = 0.02
		}
		if name == "decoder.token_embedding.weight" || name == "decoder.positional_embedding" {
			scale = 0.05
		}
		for i := range out {
			out[i] = float32(rng.NormFloat64() * scale)
		}
		if name == "decoder.token_embedding.weight" && d.ZeroEndOfTextLogit {
			// the end-of-text id is TextVocab in both multilingual vocabularies
			eot := TextVocab // the multilingual end-of-text id (the loader shifts it past 50256)
			if d.vocab() == VocabEn {
				eot = TextVocab - 1 // English-only: GPT-2's 50256
			}
			clear(out[eot*d.State : (eot+1)*d.State])
		}
	}
	return out
}

func hasSuffix(s, suf string) bool { return len(s) >= len(suf) && s[len(s)-len(suf):] == suf }

// F16 converts f to IEEE 754 binary16, rounding to nearest even.
func F16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff == 0:
		return sign
	case exp >= 31:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		h := uint16(mant >> shift)
		if rem := mant & (1<<shift - 1); rem > 1<<(shift-1) || (rem == 1<<(shift-1) && h&1 == 1) {
			h++
		}
		return sign | h
	}
	h := sign | uint16(exp)<<10 | uint16(mant>>13)
	if rem := mant & 0x1fff; rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++
	}
	return h
}

// WriteSparse writes a file with hyperparameters h (ftype 0 or 1) whose
// headers, mel filters and vocabulary are real and whose tensor data are
// holes (f.Seek past them, then one Truncate): a file of any declared size
// that takes no disk, for checks that must refuse it by its header alone.
func WriteSparse(f *os.File, h Hparams) error {
	if h.Ftype != 0 && h.Ftype != 1 {
		return fmt.Errorf("synth: sparse files are f32 or f16, not ftype %d", h.Ftype)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	le := func(vs ...int32) {
		for _, v := range vs {
			_ = binary.Write(bw, binary.LittleEndian, v)
		}
	}
	le(Magic, h.Vocab, h.AudioCtx, h.AudioState, h.AudioHead, h.AudioLayer,
		h.TextCtx, h.TextState, h.TextHead, h.TextLayer, h.Mels, h.Ftype)
	le(h.Mels, FFTBins)
	_ = binary.Write(bw, binary.LittleEndian, MelFilters(int(h.Mels)))
	le(TextVocab)
	for id := range TextVocab {
		tok := Token(id)
		le(int32(len(tok)))
		_, _ = bw.WriteString(tok)
	}
	for _, t := range Tensors(h) {
		ttype := int32(0)
		if t.F16 && h.Ftype == 1 {
			ttype = 1
		}
		le(int32(len(t.Ne)), int32(len(t.Name)), ttype)
		n := int64(1)
		for _, x := range t.Ne {
			le(int32(x))
			n *= int64(x)
		}
		_, _ = bw.WriteString(t.Name)
		if err := bw.Flush(); err != nil {
			return err
		}
		if _, err := f.Seek(n*int64(4-2*ttype), io.SeekCurrent); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	end, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	return f.Truncate(end)
}
