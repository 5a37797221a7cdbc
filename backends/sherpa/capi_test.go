package sherpa

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends/internal/native"
)

// cLayouts pairs each Go mirror with the C struct of testdata/capi_layout.h
// it stands for.
var cLayouts = []struct {
	c     string
	goVal any
}{
	{"SherpaOnnxOfflineTtsVitsModelConfig", ttsVits{}},
	{"SherpaOnnxOfflineTtsMatchaModelConfig", ttsMatcha{}},
	{"SherpaOnnxOfflineTtsKokoroModelConfig", ttsKokoro{}},
	{"SherpaOnnxOfflineTtsKittenModelConfig", ttsKitten{}},
	{"SherpaOnnxOfflineTtsZipvoiceModelConfig", ttsZipvoice{}},
	{"SherpaOnnxOfflineTtsPocketModelConfig", ttsPocket{}},
	{"SherpaOnnxOfflineTtsSupertonicModelConfig", ttsSupertonic{}},
	{"SherpaOnnxOfflineTtsModelConfig", ttsModelConfig{}},
	{"SherpaOnnxOfflineTtsConfig", ttsConfig{}},
	{"SherpaOnnxGeneratedAudio", generatedAudio{}},
	{"SherpaOnnxGenerationConfig", generationConfig{}},
	{"SherpaOnnxFeatureConfig", featureConfig{}},
	{"SherpaOnnxHomophoneReplacerConfig", homophoneReplacer{}},
	{"SherpaOnnxOfflineTransducerModelConfig", offTransducer{}},
	{"SherpaOnnxOfflineNemoEncDecCtcModelConfig", offOneModel{}},
	{"SherpaOnnxOfflineWhisperModelConfig", offWhisper{}},
	{"SherpaOnnxOfflineCanaryModelConfig", offCanary{}},
	{"SherpaOnnxOfflineCohereTranscribeModelConfig", offCohere{}},
	{"SherpaOnnxOfflineFireRedAsrModelConfig", offEncDec{}},
	{"SherpaOnnxOfflineMoonshineModelConfig", offMoonshine{}},
	{"SherpaOnnxOfflineLMConfig", offLM{}},
	{"SherpaOnnxOfflineSenseVoiceModelConfig", offSenseVoice{}},
	{"SherpaOnnxOfflineFunASRNanoModelConfig", offFunASRNano{}},
	{"SherpaOnnxOfflineQwen3ASRModelConfig", offQwen3ASR{}},
	{"SherpaOnnxOfflineModelConfig", offModelConfig{}},
	{"SherpaOnnxOfflineRecognizerConfig", offRecognizerConfig{}},
	{"SherpaOnnxOfflineRecognizerResult", offResult{}},
	{"SherpaOnnxOnlineParaformerModelConfig", onParaformer{}},
	{"SherpaOnnxOnlineModelConfig", onModelConfig{}},
	{"SherpaOnnxOnlineCtcFstDecoderConfig", onCtcFst{}},
	{"SherpaOnnxOnlineRecognizerConfig", onRecognizerConfig{}},
	{"SherpaOnnxOnlineRecognizerResult", onResult{}},
	{"SherpaOnnxOfflineSpeakerSegmentationPyannoteModelConfig", pyannoteConfig{}},
	{"SherpaOnnxOfflineSpeakerSegmentationModelConfig", segmentationConfig{}},
	{"SherpaOnnxSpeakerEmbeddingExtractorConfig", embeddingConfig{}},
	{"SherpaOnnxFastClusteringConfig", clusteringConfig{}},
	{"SherpaOnnxOfflineSpeakerDiarizationConfig", diarizationConfig{}},
	{"SherpaOnnxOfflineSpeakerDiarizationSegment", diarizationSegment{}},
}

// goLayout prints what the C program prints, from the Go mirrors:
// "NAME size N" and "NAME.field off N" lines.
func goLayout() string {
	var b strings.Builder
	for _, l := range cLayouts {
		t := reflect.TypeOf(l.goVal)
		fmt.Fprintf(&b, "%s size %d\n", l.c, t.Size())
		for i := range t.NumField() {
			f := t.Field(i)
			fmt.Fprintf(&b, "%s.%s off %d\n", l.c, f.Tag.Get("c"), f.Offset)
		}
	}
	return b.String()
}

// cProgram is the C source that prints the same lines from the fixture
// header; the member names come from the Go tags, so a Go field whose tag
// names no C member fails to compile.
func cProgram(header string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#include <stddef.h>\n#include <stdio.h>\n#include %q\nint main(void) {\n", header)
	for _, l := range cLayouts {
		t := reflect.TypeOf(l.goVal)
		fmt.Fprintf(&b, "  printf(\"%s size %%zu\\n\", sizeof(%s));\n", l.c, l.c)
		for i := range t.NumField() {
			m := t.Field(i).Tag.Get("c")
			fmt.Fprintf(&b, "  printf(\"%s.%s off %%zu\\n\", offsetof(%s, %s));\n", l.c, m, l.c, m)
		}
		// Every C member must have a Go field: the C side counts them by
		// the end of the last member against the size, checked below by
		// comparing sizes; a missing middle member shifts an offset.
	}
	b.WriteString("  return 0;\n}\n")
	return b.String()
}

// TestCLayout compiles a C program against testdata/capi_layout.h (the
// 1.13.8 layouts) with the system's gcc and compares every struct size and
// member offset it prints with the Go mirrors'.
func TestCLayout(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		native.SkipUnavailable(t, fmt.Errorf("%w: gcc (Debian gcc, installed by make deps)", native.ErrUnavailable))
	}
	hdr, err := filepath.Abs("testdata/capi_layout.h")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "layout.c")
	if err := os.WriteFile(src, []byte(cProgram(hdr)), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "layout")
	if out, err := exec.Command(gcc, "-std=c11", "-Wall", "-Werror", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	want, got := strings.Split(string(out), "\n"), strings.Split(goLayout(), "\n")
	if len(want) != len(got) {
		t.Fatalf("C printed %d lines, Go %d", len(want), len(got))
	}
	bad := 0
	for i := range want {
		if want[i] != got[i] {
			t.Errorf("C %q, Go %q", want[i], got[i])
			bad++
		}
	}
	if bad == 0 {
		t.Logf("%d sizes and offsets match", len(want)-1)
	}
}
