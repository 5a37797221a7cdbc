package whisper

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

// ModelInfo is what CheckModel read from a model file.
type ModelInfo struct {
	Hparams      synth.Hparams
	Multilingual bool
	Bytes        int64  // the file's size
	WeightBytes  int64  // the tensors' data, as the library allocates it
	Type         string // the matrices' type: f32, f16, q4_0, q4_1, q5_0, q5_1 or q8_0
}

// ggmlType is one ggml tensor type a Whisper file may hold: its name and
// its block (elements per block, bytes per block).
type ggmlType struct {
	name         string
	block, bytes int64
}

// ggmlTypes are the tensor types whisper.cpp 1.9.1 loads from a Whisper
// file, by ggml type id (ggml.h's enum ggml_type).
var ggmlTypes = map[int32]ggmlType{
	0: {"f32", 1, 4},
	1: {"f16", 1, 2},
	2: {"q4_0", 32, 18},
	3: {"q4_1", 32, 20},
	6: {"q5_0", 32, 22},
	7: {"q5_1", 32, 24},
	8: {"q8_0", 32, 34},
}

// ftypeMatrix maps a file's ftype (ggml.h's enum ggml_ftype, after the
// quantization version is taken off) to the ggml type of its matrices.
var ftypeMatrix = map[int32]int32{0: 0, 1: 1, 2: 2, 3: 3, 7: 8, 8: 6, 9: 7}

// qntVersionFactor and qntVersion: a quantized file's ftype is
// qntVersion*1000 + ftype (ggml's GGML_QNT_VERSION_FACTOR and
// GGML_QNT_VERSION); version 2 is the block layout ggml reads today.
const (
	qntVersionFactor = 1000
	qntVersion       = 2
)

// matrixType returns the ggml type of the file's matrices for hparams h
// (after checkHparams).
func matrixType(h synth.Hparams) int32 { return ftypeMatrix[h.Ftype%qntVersionFactor] }

// CheckModel reads a whole ggml Whisper file and checks every part the
// library would read (hyperparameters in range, mel filters, vocabulary,
// every tensor's header, shape, type and data length, no tensor missing
// or repeated, nothing after the last) before whisper.cpp sees it:
// whisper.cpp trusts lengths from the file (a bad one is an allocation
// that aborts the process, or a read past the end). Every type
// whisper.cpp 1.9.1 loads is accepted: f32, f16 and the quantized q4_0,
// q4_1, q5_0, q5_1 and q8_0 (their block sizes checked: a quantized row
// must be a whole number of 32-element blocks), with 80 or 128 mel bands.
// Errors wrap backends.ErrInvalid.
func CheckModel(path string) (ModelInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return ModelInfo{}, backends.Invalidf("whisper: model file: %v", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return ModelInfo{}, backends.Invalidf("whisper: model file %s is not a regular file", path)
	}
	r := &reader{f: f, r: bufio.NewReaderSize(f, 1<<16), left: st.Size()}
	info, err := checkModel(r)
	if err != nil {
		return ModelInfo{}, backends.Invalidf("whisper: model file %s: %w", path, err)
	}
	info.Bytes = st.Size()
	info.Type = ggmlTypes[matrixType(info.Hparams)].name
	return info, nil
}

// reader reads little-endian values and counts what is left of the file;
// it seeks over tensor data, so a large model's check reads its headers,
// not its gigabytes.
type reader struct {
	f    *os.File
	r    *bufio.Reader
	left int64
	err  error
}

var errShort = errors.New("the file ends early (truncated?)")

func (r *reader) i32() int32 {
	var b [4]byte
	r.bytes(b[:])
	return int32(binary.LittleEndian.Uint32(b[:]))
}

func (r *reader) bytes(b []byte) {
	if r.err != nil {
		return
	}
	if int64(len(b)) > r.left {
		r.err = errShort
		return
	}
	if _, err := io.ReadFull(r.r, b); err != nil {
		r.err = errShort
		return
	}
	r.left -= int64(len(b))
}

func (r *reader) skip(n int64) {
	if r.err != nil {
		return
	}
	if n > r.left {
		r.err = errShort
		return
	}
	r.left -= n
	if b := int64(r.r.Buffered()); n <= b {
		_, _ = r.r.Discard(int(n))
		return
	}
	if _, err := r.f.Seek(n-int64(r.r.Buffered()), io.SeekCurrent); err != nil {
		r.err = errShort
		return
	}
	r.r.Reset(r.f)
}

func checkModel(r *reader) (ModelInfo, error) {
	if m := uint32(r.i32()); r.err != nil || m != synth.Magic {
		return ModelInfo{}, errors.New("not a ggml Whisper model (bad magic)")
	}
	var h synth.Hparams
	for _, p := range []*int32{&h.Vocab, &h.AudioCtx, &h.AudioState, &h.AudioHead, &h.AudioLayer,
		&h.TextCtx, &h.TextState, &h.TextHead, &h.TextLayer, &h.Mels, &h.Ftype} {
		*p = r.i32()
	}
	if r.err != nil {
		return ModelInfo{}, r.err
	}
	if err := checkHparams(h); err != nil {
		return ModelInfo{}, err
	}
	nMel, nFFT := r.i32(), r.i32()
	if r.err == nil && (nMel != h.Mels || nFFT != synth.FFTBins) {
		return ModelInfo{}, fmt.Errorf("mel filters %dx%d, want %dx%d", nMel, nFFT, h.Mels, synth.FFTBins)
	}
	r.skip(4 * int64(nMel) * int64(nFFT))
	nTok := r.i32()
	if r.err == nil && (nTok < 1 || nTok > h.Vocab) {
		return ModelInfo{}, fmt.Errorf("vocabulary of %d tokens, want 1..%d", nTok, h.Vocab)
	}
	for i := int32(0); i < nTok && r.err == nil; i++ {
		n := r.i32()
		if n < 0 || n > 1024 {
			return ModelInfo{}, fmt.Errorf("token %d has length %d (over 1024)", i, n)
		}
		r.skip(int64(n))
	}
	if r.err != nil {
		return ModelInfo{}, r.err
	}
	want := map[string]synth.Tensor{}
	for _, t := range synth.Tensors(h) {
		want[t.Name] = t
	}
	seen := map[string]bool{}
	var weights int64
	for r.left > 0 {
		n, err := checkTensor(r, h, want, seen)
		if err != nil {
			return ModelInfo{}, err
		}
		weights += n
	}
	if len(seen) != len(want) {
		for _, t := range synth.Tensors(h) {
			if !seen[t.Name] {
				return ModelInfo{}, fmt.Errorf("tensor %s is missing (%d of %d present)", t.Name, len(seen), len(want))
			}
		}
	}
	return ModelInfo{Hparams: h, Multilingual: h.Vocab >= 51865, WeightBytes: weights}, nil
}

func checkHparams(h synth.Hparams) error {
	ft, qv := h.Ftype%qntVersionFactor, h.Ftype/qntVersionFactor
	mt, known := ftypeMatrix[ft]
	switch {
	case h.Ftype < 0 || !known:
		return fmt.Errorf("ftype %d: whisper.cpp 1.9.1 loads f32 (0), f16 (1), q4_0 (2), q4_1 (3), q8_0 (7), q5_0 (8) and q5_1 (9)", h.Ftype)
	case mt > 1 && qv != qntVersion:
		return fmt.Errorf("ftype %d: %s blocks of quantization version %d, want version %d (quantize the f16 file again with whisper.cpp's quantize tool)", h.Ftype, ggmlTypes[mt].name, qv, qntVersion)
	case mt <= 1 && qv != 0:
		return fmt.Errorf("ftype %d: an unquantized file with a quantization version", h.Ftype)
	case mt > 1 && h.AudioState%int32(ggmlTypes[mt].block) != 0:
		return fmt.Errorf("n_audio_state %d is not a multiple of %s's %d-element block", h.AudioState, ggmlTypes[mt].name, ggmlTypes[mt].block)
	case h.Vocab < 51864 || h.Vocab > 51866:
		return fmt.Errorf("n_vocab %d, want 51864..51866 (Whisper's vocabularies)", h.Vocab)
	case h.AudioCtx != synth.AudioCtx:
		return fmt.Errorf("n_audio_ctx %d, want %d", h.AudioCtx, synth.AudioCtx)
	case h.AudioState != h.TextState:
		return fmt.Errorf("n_audio_state %d differs from n_text_state %d", h.AudioState, h.TextState)
	case h.AudioState < 8 || h.AudioState > 4096:
		return fmt.Errorf("n_audio_state %d outside 8..4096", h.AudioState)
	case h.AudioHead < 1 || h.AudioHead > 64 || h.AudioState%h.AudioHead != 0 || h.TextHead < 1 || h.TextHead > 64 || h.TextState%h.TextHead != 0:
		return fmt.Errorf("heads %d/%d do not divide the state %d", h.AudioHead, h.TextHead, h.AudioState)
	case h.AudioLayer < 1 || h.AudioLayer > 64 || h.TextLayer < 1 || h.TextLayer > 64:
		return fmt.Errorf("layers %d/%d outside 1..64", h.AudioLayer, h.TextLayer)
	case h.TextCtx < 16 || h.TextCtx > 448:
		return fmt.Errorf("n_text_ctx %d outside 16..448", h.TextCtx)
	case h.Mels != 80 && h.Mels != 128:
		return fmt.Errorf("n_mels %d, want 80 or 128", h.Mels)
	}
	return nil
}

// checkTensor checks one tensor's header and skips its data, returning
// the data's length.
func checkTensor(r *reader, h synth.Hparams, want map[string]synth.Tensor, seen map[string]bool) (int64, error) {
	nDims, nameLen, ttype := r.i32(), r.i32(), r.i32()
	if r.err != nil {
		return 0, r.err
	}
	if nDims < 1 || nDims > 4 || nameLen < 1 || nameLen > 256 {
		return 0, fmt.Errorf("a tensor header has %d dims and a %d-byte name", nDims, nameLen)
	}
	ne := make([]int, nDims)
	for i := range ne {
		ne[i] = int(r.i32())
	}
	name := make([]byte, nameLen)
	r.bytes(name)
	if r.err != nil {
		return 0, r.err
	}
	t, ok := want[string(name)]
	switch {
	case !ok:
		return 0, fmt.Errorf("unknown tensor %q", name)
	case seen[t.Name]:
		return 0, fmt.Errorf("tensor %s appears twice", t.Name)
	case !sameShape(ne, t.Ne):
		return 0, fmt.Errorf("tensor %s has shape %v, want %v", t.Name, ne, t.Ne)
	}
	seen[t.Name] = true
	wantType := tensorType(t, h)
	if ttype != wantType {
		return 0, fmt.Errorf("tensor %s has type %d, want %d (%s)", t.Name, ttype, wantType, ggmlTypes[wantType].name)
	}
	gt := ggmlTypes[wantType]
	if int64(t.Ne[0])%gt.block != 0 {
		return 0, fmt.Errorf("tensor %s's rows of %d are not whole %s blocks of %d", t.Name, t.Ne[0], gt.name, gt.block)
	}
	n := int64(1)
	for _, x := range t.Ne {
		n *= int64(x)
	}
	size := n / gt.block * gt.bytes
	r.skip(size)
	return size, r.err
}

// tensorType is the ggml type whisper.cpp 1.9.1 creates tensor t with in
// a file of hparams h: vectors and positional embeddings f32, the
// convolutions f16 (f32 in an f32 file), the matrices the file's type.
func tensorType(t synth.Tensor, h synth.Hparams) int32 {
	switch {
	case !t.F16:
		return 0
	case len(t.Ne) == 3:
		return min(1, matrixType(h))
	}
	return matrixType(h)
}

func sameShape(got, want []int) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}
