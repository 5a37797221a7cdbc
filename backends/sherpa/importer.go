package sherpa

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

// Import writes the manifest of a folder in sherpa-onnx's release layout
// (an archive from its releases unpacked into the models root), so that
// a user who downloaded a model elsewhere registers it as it is: every
// regular file with its size and SHA-256, the family detected from the
// file names and the ONNX metadata, the options naming the files. It
// returns the manifest it wrote. A folder whose family it cannot tell, or
// that holds a symlink or a file outside it, is refused; the engine's
// Validate checks the rest when the model is registered.
//
// Detection (release layouts of sherpa-onnx's archives):
//   - a pyannote segmentation model (metadata receptive_field_size) and a
//     speaker embedding extractor (metadata framework), released apart:
//     put both in one folder: diarization;
//   - NAME-encoder.onnx with Whisper's metadata (n_text_ctx),
//     NAME-decoder.onnx, NAME-tokens.txt: whisper;
//   - one *.onnx with metadata comment "piper", tokens.txt, espeak-ng-data/:
//     vits (Piper; vits-piper-* archives);
//   - model-steps-*.onnx (Matcha, metadata model_type matcha-tts) with a
//     vocoder whose model_type is hifigan, tokens.txt, espeak-ng-data/:
//     matcha (copy the vocoder, released apart, into the folder);
//   - one *.onnx with metadata style_dim, voices.bin, tokens.txt,
//     espeak-ng-data/: kokoro (kokoro-en-v0_19);
//   - preprocess*.onnx, encode*.onnx, uncached_decode*.onnx,
//     cached_decode*.onnx, tokens.txt: moonshine (v1);
//   - encoder*.onnx (metadata model_type EncDecMultiTaskModel),
//     decoder*.onnx, tokens.txt: canary;
//   - encoder*.onnx, decoder*.onnx, joiner*.onnx, tokens.txt: NeMo's
//     (nemo-transducer: Parakeet TDT and RNNT) when the encoder's
//     model_type is EncDecRNNTBPEModel, else icefall's transducer, streaming (online-transducer) when the encoder's
//     metadata has decode_chunk_len, else offline (transducer); a
//     bpe.vocab beside them becomes option bpe_vocab;
//   - model*.onnx with SenseVoice's metadata (lfr_window_size, with_itn),
//     tokens.txt: sense-voice;
//   - model*.onnx with metadata model_type paraformer, tokens.txt:
//     paraformer;
//   - model*.onnx with metadata vocab_size and subsampling_factor and a
//     NeMo model_type (EncDecCTCModel*, EncDecHybridRNNTCTC*), tokens.txt:
//     nemo-ctc.
//
// When a file comes as float and int8 exports (model.onnx and
// model.int8.onnx), the float one is named; the option overrides the
// choice.
func Import(dir, name string, maxSlots int) (catalogue.Manifest, error) {
	if name == "" {
		name = filepath.Base(filepath.Clean(dir))
	}
	if !catalogue.ValidName(name) {
		return catalogue.Manifest{}, fmt.Errorf("import: %q is not a valid checkpoint name", name)
	}
	var files []catalogue.File
	var onnxFiles []string
	hasEspeak := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") || rel == catalogue.ManifestName {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return fmt.Errorf("import: %s is a symlink (copy the file into the folder)", rel)
		}
		if d.IsDir() {
			if rel == "espeak-ng-data" {
				hasEspeak = true
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("import: %s is not a regular file", rel)
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		sum, err := catalogue.HashFile(p)
		if err != nil {
			return err
		}
		files = append(files, catalogue.File{Path: rel, Size: st.Size(), SHA256: sum})
		if !strings.Contains(rel, "/") && strings.HasSuffix(rel, ".onnx") {
			onnxFiles = append(onnxFiles, rel)
		}
		return nil
	})
	if err != nil {
		return catalogue.Manifest{}, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	opts, fam, err := detect(dir, onnxFiles, hasEspeak)
	if err != nil {
		return catalogue.Manifest{}, err
	}
	ob, err := json.Marshal(opts)
	if err != nil {
		return catalogue.Manifest{}, err
	}
	m := catalogue.Manifest{
		Schema: catalogue.Schema, Name: name, Task: families[fam].task, Engine: Name,
		Description: "sherpa-onnx " + fam + " (imported by sluice-models -import)",
		Source:      "sherpa-onnx release layout", Files: files, Options: ob,
		Parallel: catalogue.Parallel{MaxSlots: maxSlots},
	}
	if rate, ok := opts["sample_rate"]; ok {
		m.SampleRate = rate.(int)
		delete(opts, "sample_rate")
		if m.Options, err = json.Marshal(opts); err != nil {
			return catalogue.Manifest{}, err
		}
	} else if m.Task == "asr" {
		m.SampleRate = SampleRate
	}
	if err := m.Check(); err != nil {
		return catalogue.Manifest{}, err
	}
	b, err := m.Marshal()
	if err != nil {
		return catalogue.Manifest{}, err
	}
	return m, os.WriteFile(filepath.Join(dir, catalogue.ManifestName), b, 0o644)
}

// pick returns the file of names (top-level *.onnx) whose name starts with
// prefix, preferring a float export to an int8 one; "" when none.
func pick(names []string, prefix string) string {
	var best string
	for _, n := range names {
		if !strings.HasPrefix(n, prefix) {
			continue
		}
		if best == "" || strings.Contains(best, "int8") && !strings.Contains(n, "int8") {
			best = n
		}
	}
	return best
}

func detect(dir string, onnxFiles []string, hasEspeak bool) (map[string]any, string, error) {
	read := func(f string) (onnxInfo, error) {
		return readONNX(filepath.Join(dir, f), 1<<40)
	}
	// Whisper's archives name every file after the model: tiny.en-encoder.onnx,
	// tiny.en-decoder.onnx, tiny.en-tokens.txt.
	for _, f := range onnxFiles {
		prefix, ok := strings.CutSuffix(f, "-encoder.onnx")
		if !ok {
			prefix, ok = strings.CutSuffix(f, "-encoder.int8.onnx")
		}
		if !ok {
			continue
		}
		info, err := read(f)
		if err != nil {
			return nil, "", err
		}
		if _, ok := info.Meta["n_text_ctx"]; !ok {
			continue
		}
		enc, dec := pick(onnxFiles, prefix+"-encoder"), pick(onnxFiles, prefix+"-decoder")
		if _, err := os.Stat(filepath.Join(dir, prefix+"-tokens.txt")); err != nil || dec == "" {
			return nil, "", backends.Invalidf("import: %s is a Whisper encoder; the folder needs %s-decoder.onnx and %s-tokens.txt", f, prefix, prefix)
		}
		return map[string]any{"family": FamilyWhisper, "encoder": enc, "decoder": dec, "tokens": prefix + "-tokens.txt"}, FamilyWhisper, nil
	}
	var seg, emb string
	for _, f := range onnxFiles {
		info, err := read(f)
		if err != nil {
			return nil, "", err
		}
		if _, ok := info.Meta["receptive_field_size"]; ok {
			seg = f
		} else if _, ok := info.Meta["framework"]; ok {
			emb = f
		}
	}
	if seg != "" && emb != "" {
		return map[string]any{"family": FamilyDiarization, "segmentation": seg, "embedding": emb}, FamilyDiarization, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "tokens.txt")); err != nil {
		return nil, "", backends.Invalidf("import: no tokens.txt: not a sherpa-onnx model folder this engine serves")
	}
	if pre, enc, un, ca := pick(onnxFiles, "preprocess"), pick(onnxFiles, "encode"), pick(onnxFiles, "uncached_decode"), pick(onnxFiles, "cached_decode"); pre != "" && enc != "" && un != "" && ca != "" {
		return map[string]any{"family": FamilyMoonshine, "preprocessor": pre, "encoder": enc, "uncached_decoder": un, "cached_decoder": ca, "tokens": "tokens.txt"}, FamilyMoonshine, nil
	}
	if enc, dec := pick(onnxFiles, "encoder_model"), pick(onnxFiles, "decoder_model_merged"); enc != "" && dec != "" {
		return map[string]any{"family": FamilyMoonshineV2, "encoder": enc, "merged_decoder": dec, "tokens": "tokens.txt"}, FamilyMoonshineV2, nil
	}
	if enc, dec := pick(onnxFiles, "encoder"), pick(onnxFiles, "decoder"); enc != "" && dec != "" && pick(onnxFiles, "joiner") == "" {
		if info, err := read(enc); err == nil && info.Meta["model_type"] == "EncDecMultiTaskModel" {
			return map[string]any{"family": FamilyCanary, "encoder": enc, "decoder": dec, "tokens": "tokens.txt"}, FamilyCanary, nil
		} else if err == nil && info.Meta["decoder_num_blocks"] != "" {
			return map[string]any{"family": FamilyOnlineParaformer, "encoder": enc, "decoder": dec, "tokens": "tokens.txt"}, FamilyOnlineParaformer, nil
		}
	}
	if enc, dec, join := pick(onnxFiles, "encoder"), pick(onnxFiles, "decoder"), pick(onnxFiles, "joiner"); enc != "" && dec != "" && join != "" {
		info, err := read(enc)
		if err != nil {
			return nil, "", err
		}
		fam := FamilyTransducer
		if mt := info.Meta["model_type"]; mt == "EncDecRNNTBPEModel" || mt == "EncDecHybridRNNTCTCBPEModel" {
			fam = FamilyNemoTransducer
		} else if _, ok := info.Meta["decode_chunk_len"]; ok {
			fam = FamilyOnlineTransducer
		}
		o := map[string]any{"family": fam, "encoder": enc, "decoder": dec, "joiner": join, "tokens": "tokens.txt"}
		if st, err := os.Stat(filepath.Join(dir, "bpe.vocab")); err == nil && st.Mode().IsRegular() {
			o["bpe_vocab"] = "bpe.vocab" // hotwords by BPE piece (bpe.go)
		}
		return o, fam, nil
	}
	for _, f := range onnxFiles {
		if info, err := read(f); err == nil && isVocoder(info) {
			continue // Matcha's vocoder, found with its acoustic model below
		}
		info, err := read(f)
		if err != nil {
			return nil, "", err
		}
		if info.Meta["model_type"] == "matcha-tts" || strings.HasPrefix(f, "model-steps") {
			voc := ""
			for _, g := range onnxFiles {
				if vi, err := read(g); err == nil && isVocoder(vi) {
					voc = g
				}
			}
			if voc == "" || !hasEspeak {
				return nil, "", backends.Invalidf("import: %s is a Matcha acoustic model; the folder needs a HiFi-GAN or Vocos vocoder (*.onnx with model_type hifigan or vocos) and espeak-ng-data", f)
			}
			o := map[string]any{"family": FamilyMatcha, "acoustic_model": f, "vocoder": voc, "tokens": "tokens.txt", "data_dir": "espeak-ng-data"}
			if r, err := strconv.Atoi(info.Meta["sample_rate"]); err == nil && r >= 1000 {
				o["sample_rate"] = r
			}
			return o, FamilyMatcha, nil
		}
		if _, ok := info.Meta["style_dim"]; ok {
			fam := FamilyKokoro
			if info.Meta["model_type"] == "kitten-tts" {
				fam = FamilyKitten
			}
			if !hasEspeak {
				return nil, "", backends.Invalidf("import: %s is a Kokoro voice but the folder has no espeak-ng-data", f)
			}
			if _, err := os.Stat(filepath.Join(dir, "voices.bin")); err != nil {
				return nil, "", backends.Invalidf("import: %s is a Kokoro voice but the folder has no voices.bin", f)
			}
			o := map[string]any{"family": fam, "model": f, "voices": "voices.bin", "tokens": "tokens.txt", "data_dir": "espeak-ng-data"}
			if lex, _ := filepath.Glob(filepath.Join(dir, "lexicon*.txt")); fam == FamilyKokoro && len(lex) > 0 && metaInt(info, "version") >= 2 {
				var names []string
				for _, l := range lex {
					names = append(names, filepath.Base(l))
				}
				o["lexicon"] = strings.Join(names, ",") // a multi-language Kokoro's lexicons
			}
			if r, err := strconv.Atoi(info.Meta["sample_rate"]); err == nil && r >= 1000 {
				o["sample_rate"] = r
			}
			return o, fam, nil
		}
		if strings.Contains(info.Meta["comment"], "piper") {
			if !hasEspeak {
				return nil, "", backends.Invalidf("import: %s is a Piper voice but the folder has no espeak-ng-data", f)
			}
			o := map[string]any{"family": FamilyVITS, "model": f, "tokens": "tokens.txt", "data_dir": "espeak-ng-data"}
			if r, err := strconv.Atoi(info.Meta["sample_rate"]); err == nil && r >= 1000 {
				o["sample_rate"] = r
			}
			return o, FamilyVITS, nil
		}
		if _, ok := info.Meta["lfr_window_size"]; ok && info.Meta["with_itn"] != "" {
			return map[string]any{"family": FamilySenseVoice, "model": pick(onnxFiles, strings.SplitN(f, ".", 2)[0]), "tokens": "tokens.txt"}, FamilySenseVoice, nil
		}
		if info.Meta["model_type"] == "paraformer" {
			return map[string]any{"family": FamilyParaformer, "model": pick(onnxFiles, strings.SplitN(f, ".", 2)[0]), "tokens": "tokens.txt"}, FamilyParaformer, nil
		}
		if mt := info.Meta["model_type"]; strings.HasPrefix(mt, "EncDecCTC") || strings.HasPrefix(mt, "EncDecHybridRNNTCTC") {
			if _, ok := info.Meta["cache_last_time_dim1"]; ok {
				f = pick(onnxFiles, strings.SplitN(f, ".", 2)[0])
				return map[string]any{"family": FamilyOnlineNemoCTC, "model": f, "tokens": "tokens.txt"}, FamilyOnlineNemoCTC, nil
			}
			if _, ok := info.Meta["subsampling_factor"]; ok {
				f = pick(onnxFiles, strings.SplitN(f, ".", 2)[0])
				return map[string]any{"family": FamilyNemoCTC, "model": f, "tokens": "tokens.txt"}, FamilyNemoCTC, nil
			}
		}
	}
	return nil, "", backends.Invalidf("import: cannot tell the family of %s from its files (%s) and their metadata; write its manifest by hand (README)", dir, strings.Join(onnxFiles, ", "))
}

// isVocoder reports whether a model is a Matcha vocoder (HiFi-GAN or Vocos).
func isVocoder(info onnxInfo) bool {
	mt := info.Meta["model_type"]
	return mt == "hifigan" || mt == "vocos" || mt == "matcha-tts vocos"
}
