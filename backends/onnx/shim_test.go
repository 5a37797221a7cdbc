package onnx

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/flite"
	"github.com/sluice-dev/sluice/backends/internal/native"
	"github.com/sluice-dev/sluice/backends/internal/speech"
)

var (
	stdOnce sync.Once
	stdWAVs [][]byte
	stdErr  error
)

// standardVAD returns the standard VAD requests' WAV files: the padded
// commands, then jfk.wav.
func standardVAD(t testing.TB) [][]byte {
	t.Helper()
	native.SkipUnavailable(t, flite.Available())
	stdOnce.Do(func() {
		ctx := context.Background()
		fs, _, err := flite.New().Open(ctx, backends.Spec{Task: "tts", Checkpoint: "slt", Slots: 1})
		if err != nil {
			stdErr = err
			return
		}
		defer fs.Close(ctx)
		for _, c := range speech.Commands() {
			in, _ := json.Marshal(audio.TTSRequest{Text: c})
			out, err := fs.Infer(ctx, backends.Request{Input: in}, nil)
			if err != nil {
				stdErr = err
				return
			}
			a, err := audio.ParseWAV(out.Data)
			if err != nil {
				stdErr = err
				return
			}
			silence := make([]int16, a.Rate)
			padded := append(append(append([]int16(nil), silence...), a.Samples...), silence...)
			stdWAVs = append(stdWAVs, audio.WAV(a.Rate, padded))
		}
	})
	if stdErr != nil {
		t.Fatal(stdErr)
	}
	b, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	native.SkipUnavailable(t, err)
	return append(append([][]byte(nil), stdWAVs...), b)
}

// samples16k decodes a WAV file to Silero's 16 kHz float samples.
func samples16k(t testing.TB, wav []byte) []float32 {
	t.Helper()
	a, err := audio.DecodeInput(context.Background(), backends.Request{Data: wav}, audio.Want{Rate: sileroRate, MaxSeconds: 300})
	if err != nil {
		t.Fatal(err)
	}
	return audio.Float32(a.Samples)
}

// noise is n samples of deterministic pseudo-random audio.
func noise(n int) []float32 {
	out := make([]float32, n)
	x := uint32(12345)
	for i := range out {
		x = x*1664525 + 1013904223
		out[i] = float32(int32(x)>>16) / 65536
	}
	return out
}

// TestShimMatchesPerWindow: the shim's one call per request gives the
// same probabilities, bit for bit, as the per-window Go loop (the live
// path's), over the standard VAD inputs and lengths around the window
// size; a request after another starts from a zero state either way.
func TestShimMatchesPerWindow(t *testing.T) {
	v := open(t, checkpoint(t)).(*session).vad
	var inputs [][]float32
	for _, wav := range standardVAD(t) {
		inputs = append(inputs, samples16k(t, wav))
	}
	for _, n := range []int{0, 1, 511, 512, 513, 1024 + 100} {
		inputs = append(inputs, noise(n))
	}
	ctx := context.Background()
	for i, in := range inputs {
		v.perWindow = false
		got, err := v.probabilities(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		v.perWindow = true
		want, err := v.probabilities(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || len(got) != (len(in)+sileroWindow-1)/sileroWindow {
			t.Fatalf("input %d (%d samples): %d probabilities from the shim, %d per window", i, len(in), len(got), len(want))
		}
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				t.Fatalf("input %d window %d: shim %v, per window %v", i, j, got[j], want[j])
			}
		}
	}
}

// TestShimCancelMidRequest: cancelling while the shim's loop runs (after a
// known number of windows, read from the shim's progress counter) sets the
// run options' terminate flag, the Run in progress fails and the loop
// stops there: the request returns ctx.Err() long before its last window,
// and the session's next request is answered as before.
func TestShimCancelMidRequest(t *testing.T) {
	s := open(t, checkpoint(t))
	v := s.(*session).vad
	in := noise(300 * sileroRate) // 9375 windows
	short := noise(20 * sileroWindow)
	want, err := v.probabilities(context.Background(), short)
	if err != nil {
		t.Fatal(err)
	}
	const cancelAt = 8
	atomic.StoreInt64(&v.shimSt.done, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for atomic.LoadInt64(&v.shimSt.done) < cancelAt {
			runtime.Gosched()
		}
		cancel()
	}()
	if _, err := v.probabilities(ctx, in); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled mid-request: %v, want context.Canceled", err)
	}
	done, total := atomic.LoadInt64(&v.shimSt.done), int64(len(in)/sileroWindow)
	t.Logf("stopped after %d of %d windows", done, total)
	if done < cancelAt || done >= total {
		t.Fatalf("the shim ran %d of %d windows, cancelled after %d", done, total, cancelAt)
	}
	got, err := v.probabilities(context.Background(), short)
	if err != nil {
		t.Fatal(err)
	}
	for j := range want {
		if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
			t.Fatalf("after the cancel, window %d: %v, want %v", j, got[j], want[j])
		}
	}
}

// TestMissingShimIsClearError: without the shim library the engine is
// unavailable, and opening or probing a model says what to build.
func TestMissingShimIsClearError(t *testing.T) {
	dir := checkpoint(t)
	t.Setenv("SLUICE_ONNX_SHIM_LIB", t.TempDir()+"/libsluice_silero.so")
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, native.ErrUnavailable) || !strings.Contains(err.Error(), "make deps") {
			t.Fatalf("%s without the shim: %v", what, err)
		}
	}
	check("Available", Available())
	_, _, err := New(Config{}).Open(context.Background(), spec(dir, 1, ""))
	check("Open", err)
	_, err = New(Config{}).Probe(context.Background(), spec(dir, 1, ""))
	check("Probe", err)
	_, err = OpenVAD(context.Background(), "", dir+"/silero_vad_v5.onnx", 1)
	check("OpenVAD", err)
}
