package whisper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/memlimit"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

var (
	typesOnce sync.Once
	typesRoot string
	typesErr  error
)

// typed builds, once per test binary, the synthetic checkpoints of every
// type whisper.cpp 1.9.1 loads (SyntheticRecipes: f16, f32, 128 mels and
// the five quantized types from whisper.cpp's quantize tool) and returns
// the folder of the checkpoint with suffix ("" is the f16 tiny model).
func typed(t *testing.T, suffix string) string {
	t.Helper()
	tiny(t)
	typesOnce.Do(func() {
		typesRoot, typesErr = os.MkdirTemp("", "sluice-whisper-types")
		if typesErr != nil {
			return
		}
		var rs []catalogue.Recipe
		if rs, typesErr = SyntheticRecipes("t", 4); typesErr != nil {
			return
		}
		_, typesErr = catalogue.Build(typesRoot, rs)
	})
	if typesErr != nil {
		t.Fatal(typesErr)
	}
	if suffix == "" {
		return filepath.Join(typesRoot, "t")
	}
	return filepath.Join(typesRoot, "t-"+suffix)
}

// TestEveryTypeLoads: f32, f16, q4_0, q4_1, q5_0,
// q5_1 and q8_0 files and a 128-mel file pass the structure check with
// their type and memory need read from the header, load, and transcribe.
func TestEveryTypeLoads(t *testing.T) {
	want := map[string]string{"": "f16", "f32": "f32", "128mel": "f16"}
	for _, q := range QuantTypes {
		want[q] = q
	}
	sizes := map[string]int64{}
	for suffix, typ := range want {
		dir := typed(t, suffix)
		info, err := CheckModel(filepath.Join(dir, ModelFile))
		if err != nil {
			t.Fatalf("%s: %v", suffix, err)
		}
		if info.Type != typ || info.WeightBytes <= 0 || info.WeightBytes > info.Bytes {
			t.Errorf("%s: type %s, weights %d of %d bytes; want type %s", suffix, info.Type, info.WeightBytes, info.Bytes, typ)
		}
		if mels := info.Hparams.Mels; (suffix == "128mel") != (mels == 128) {
			t.Errorf("%s: %d mels", suffix, mels)
		}
		sizes[typ+"/"+suffix] = info.Bytes
		s := open(t, spec(dir, 1, ""))
		r, raw := infer(t, s, pcm(t, 3), `{"sample_rate":16000}`)
		if r.Text == "" || r.Duration != 3 {
			t.Errorf("%s: %s", suffix, raw)
		}
	}
	t.Logf("file sizes: %v", sizes)
	// Quantized files are smaller than the f16 one they came from.
	for _, q := range QuantTypes {
		if sizes[q+"/"+q] >= sizes["f16/"] {
			t.Errorf("%s file %d bytes, not under f16's %d", q, sizes[q+"/"+q], sizes["f16/"])
		}
	}
}

// TestTypesMatchedAcrossSlots (whisper.matched-outputs for the quantized
// and 128-mel files): each input's answer from a fresh 1-slot session is
// the answer every slot of 1-, 2- and 4-slot pools gives, whatever came
// before it on that slot: each slot runs the inputs in its own seeded
// shuffled order with other requests interleaved.
func TestTypesMatchedAcrossSlots(t *testing.T) {
	in := [][]byte{pcm(t, 2.5), pcm(t, 4)}
	others := []backends.Request{
		{Data: pcm(t, 1.5), Input: json.RawMessage(`{"sample_rate":16000,"language":"de"}`)},
		{Data: jfk(t)[:44+2*SampleRate*5], Input: json.RawMessage(`{"language":"fr"}`)},
	}
	for _, suffix := range []string{"q5_0", "q8_0", "128mel"} {
		t.Run(suffix, func(t *testing.T) {
			dir := typed(t, suffix)
			want := make([]string, len(in))
			ref := open(t, spec(dir, 1, ""))
			for i, b := range in {
				_, want[i] = infer(t, ref, b, `{"sample_rate":16000}`)
			}
			for _, slots := range []int{1, 2, 4} {
				primary := open(t, spec(dir, slots, ""))
				sessions := []backends.Session{primary}
				for k := 1; k < slots; k++ {
					c, err := primary.Clone(context.Background(), k)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { c.Close(context.Background()) })
					sessions = append(sessions, c)
				}
				var wg sync.WaitGroup
				for k, s := range sessions {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(slots), uint64(k)))
						type job struct {
							req   backends.Request
							check int // index into want, -1: not checked
						}
						var jobs []job
						for i, b := range in {
							jobs = append(jobs, job{backends.Request{Data: b, Input: json.RawMessage(`{"sample_rate":16000}`)}, i})
						}
						jobs = append(jobs, job{others[k%len(others)], -1})
						rng.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
						for _, j := range jobs {
							out, err := s.Infer(context.Background(), j.req, nil)
							if err != nil {
								t.Error(err)
								return
							}
							if j.check >= 0 && string(out.JSON) != want[j.check] {
								t.Errorf("%d slots, slot %d, input %d:\n got %s\nwant %s", slots, k, j.check, out.JSON, want[j.check])
							}
						}
					}()
				}
				wg.Wait()
			}
		})
	}
}

// TestHugeHeaderRefusedByMemory: a sparse file
// whose header declares about 8 GB of tensors (holes, no disk) under a
// 1 GB limit is refused as invalid before the library sees it, the error
// naming the need and the limit, and a loaded model keeps serving.
func TestHugeHeaderRefusedByMemory(t *testing.T) {
	s := open(t, spec(tiny(t), 1, ""))
	root := t.TempDir()
	r, err := Recipe("huge", synth.Tiny, Seed, 1)
	if err != nil {
		t.Fatal(err)
	}
	r.Files[0].Content = []byte("placeholder")
	if _, err := catalogue.Build(root, []catalogue.Recipe{r}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "huge", ModelFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	// large-v3's width in f32 (1280 states, 128 mels) with 42+42 layers.
	h := synth.Hparams{Vocab: synth.VocabV3, AudioCtx: synth.AudioCtx, AudioState: 1280, AudioHead: 20, AudioLayer: 42,
		TextCtx: 448, TextState: 1280, TextHead: 20, TextLayer: 42, Mels: 128, Ftype: 0}
	if err := synth.WriteSparse(f, h); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// The manifest names the file's size and hash (the catalogue reads
	// the holes once to hash them; about 8 GB of zeros from memory).
	mpath := filepath.Join(root, "huge", catalogue.ManifestName)
	mb, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	m, err := catalogue.ParseManifest(mb)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if m.Files[0].SHA256, err = catalogue.HashFile(path); err != nil {
		t.Fatal(err)
	}
	m.Files[0].Size = st.Size()
	if mb, err = m.Marshal(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mpath, mb, 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := CheckModel(path)
	if err != nil {
		t.Fatalf("the sparse file is not a valid model: %v", err)
	}
	if info.WeightBytes < 7<<30 {
		t.Fatalf("declared weights %d bytes, want about 8 GB", info.WeightBytes)
	}
	defer memlimit.SetOverride(1 << 30)()
	sp := spec(filepath.Join(root, "huge"), 1, "")
	for name, err := range map[string]error{"Validate": New().Validate(sp), "Open": openErr(sp)} {
		if !errors.Is(err, backends.ErrInvalid) {
			t.Fatalf("%s: %v, want invalid", name, err)
		}
		msg := err.Error()
		for _, want := range []string{memlimit.MB(memoryNeed(info)), "1024 MB", string(memlimit.Override), "model.bin"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q lacks %q", name, msg, want)
			}
		}
	}
	if r, raw := infer(t, s, pcm(t, 2), `{"sample_rate":16000}`); r.Duration != 2 || r.Text == "" {
		t.Fatalf("the loaded model after the refusal: %s", raw)
	}
	t.Logf("need %s", memlimit.MB(memoryNeed(info)))
}

func openErr(sp backends.Spec) error {
	s, _, err := New().Open(context.Background(), sp)
	if err == nil {
		s.Close(context.Background())
		return fmt.Errorf("opened")
	}
	return err
}

// TestCPUVariantChosen: the build's CPU backend is
// several modules (libggml-cpu-<variant>.so) and ggml loads the best one
// this CPU executes: exactly one is mapped, and it is the one the CPU's
// flags call for among the built variants (x64, haswell, skylakex).
func TestCPUVariantChosen(t *testing.T) {
	tiny(t)
	if v := os.Getenv("SLUICE_WHISPER_CPU_VARIANTS"); v != "" && v != DefaultCPUVariants {
		t.Logf("variants %q: the expectation below is for the default %q", v, DefaultCPUVariants)
		return
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	loaded := map[string]bool{}
	for _, line := range strings.Split(string(maps), "\n") {
		if i := strings.Index(line, "libggml-cpu-"); i >= 0 {
			loaded[strings.TrimSuffix(line[i+len("libggml-cpu-"):], ".so")] = true
		}
	}
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	for _, line := range strings.Split(string(info), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			for _, f := range strings.Fields(v) {
				flags[f] = true
			}
			break
		}
	}
	has := func(fs ...string) bool {
		for _, f := range fs {
			if !flags[f] {
				return false
			}
		}
		return true
	}
	want := "x64"
	if has("avx", "avx2", "fma", "f16c", "bmi2", "sse4_2") {
		want = "haswell"
		if has("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw") {
			want = "skylakex"
		}
	}
	if len(loaded) != 1 || !loaded[want] {
		t.Fatalf("loaded CPU variants %v, want only %s", loaded, want)
	}
	t.Logf("ggml chose libggml-cpu-%s.so for this CPU", want)
}
