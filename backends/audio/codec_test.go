package audio

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/internal/native"
	"github.com/sluice-dev/sluice/backends/internal/sndfile"
)

func needSndfile(t testing.TB) {
	t.Helper()
	native.SkipUnavailable(t, sndfile.Load())
}

// encoded returns seconds of a 300 Hz tone at rate, encoded with libsndfile
// as format (major | subtype).
func encoded(t testing.TB, format, rate int, seconds float64) []byte {
	t.Helper()
	b, err := sndfile.Encode(context.Background(), sine(rate, 300, seconds, 8000), rate, format, 1<<26)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var uploadFormats = []struct {
	name   string
	format int
	rate   int // a rate the codec takes
}{
	{"flac", sndfile.FormatFLAC | sndfile.SubPCM16, 44100},
	{"vorbis", sndfile.FormatOGG | sndfile.SubVorbis, 22050},
	{"opus", sndfile.FormatOGG | sndfile.SubOpus, 48000},
	{"mp3", sndfile.FormatMPEG | sndfile.SubMP3, 22050},
}

// crossings counts sign changes: a 300 Hz tone has 600 a second.
func crossings(s []int16) int {
	n := 0
	for i := 1; i < len(s); i++ {
		if (s[i-1] < 0) != (s[i] < 0) {
			n++
		}
	}
	return n
}

// Uploads in every compressed format decode, recognised by their content,
// to the engine's rate with their duration and their tone.
func TestDecodeInputCodecs(t *testing.T) {
	needSndfile(t)
	for _, c := range uploadFormats {
		t.Run(c.name, func(t *testing.T) {
			b := encoded(t, c.format, c.rate, 2)
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
			// In memory at the file's own rate, too.
			if own, err := Decode(b, 0); err != nil || own.Rate != c.rate {
				t.Fatalf("Decode: rate %d, %v", own.Rate, err)
			}
		})
	}
}

func TestCodecSniffing(t *testing.T) {
	for head, want := range map[string]string{
		"fLaC\x00":          "FLAC audio",
		"OggS\x00\x02":      "Ogg audio",
		"ID3\x04":           "MP3 audio",
		"\xff\xfb\x90\x64":  "MP3 audio",
		"RIFF\x00\x00WAVE":  "",
		"\x00\x00\x00 ftyp": "",
		"hello":             "",
		"":                  "",
	} {
		if got := codecName([]byte(head)); got != want {
			t.Errorf("%q: %q, want %q", head, got, want)
		}
	}
	// Declared raw PCM is raw, whatever its first bytes look like.
	if got := codecOf(bytes.NewReader([]byte("fLaC\x00\x00")), 8000); got != "" {
		t.Errorf("declared raw PCM sniffed as %q", got)
	}
}

// audio.duration-limit for compressed uploads: the stated length is
// refused before decoding (a fraction of the file read), and the decode
// loop stops at the limit when the header's length is only an estimate.
func TestDecodeInputCodecDurationLimit(t *testing.T) {
	needSndfile(t)
	for _, c := range uploadFormats {
		t.Run(c.name, func(t *testing.T) {
			b := encoded(t, c.format, c.rate, 60)
			blob := newBlob(b)
			_, err := DecodeInput(context.Background(), backends.Request{Body: blob}, Want{Rate: 16000, MaxSeconds: 5})
			if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "5 s") {
				t.Fatalf("got %v, want ErrInvalid naming the 5 s limit", err)
			}
			t.Logf("%s: read %d of %d bytes before refusing: %v", c.name, blob.bytes.Load(), len(b), err)
			// libsndfile finds an Ogg Vorbis stream's length by reading
			// its pages through to the last granule position: bytes
			// linear in the upload, no sample decoded.
			if c.name != "vorbis" && blob.bytes.Load() > int64(len(b))/4 {
				t.Fatalf("read %d of %d bytes before refusing", blob.bytes.Load(), len(b))
			}
		})
	}
}

// audio.decode-cancel for compressed uploads: once the context ends no
// further piece is read and the error is the context's.
func TestDecodeInputCodecStopsWhenContextEnds(t *testing.T) {
	needSndfile(t)
	for _, c := range uploadFormats {
		t.Run(c.name, func(t *testing.T) {
			b := encoded(t, c.format, c.rate, 30)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			blob := newBlob(b)
			var at int64 = -1
			blob.before = func(n int64) {
				if at < 0 && blob.bytes.Load() > 4096 {
					at = n
					cancel()
				}
			}
			_, err := DecodeInput(ctx, backends.Request{Body: blob}, Want{Rate: 16000, MaxSeconds: 300})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want an error wrapping context.Canceled", err)
			}
			if n := blob.reads.Load(); n != at {
				t.Fatalf("%d reads, want %d: decoding went on after the context ended", n, at)
			}
			if blob.bytes.Load() >= int64(len(b))/2 {
				t.Fatalf("read %d of %d bytes", blob.bytes.Load(), len(b))
			}
		})
	}
}

// Corrupt compressed uploads (truncated, bytes overwritten) are a 400 or
// decode what is sound; never a crash, never past the limit.
func TestDecodeInputCorruptCodecs(t *testing.T) {
	needSndfile(t)
	for _, c := range uploadFormats {
		good := encoded(t, c.format, c.rate, 1)
		for i := range 40 {
			b := bytes.Clone(good)
			switch i % 3 {
			case 0:
				b = b[:len(b)*i/40]
			case 1:
				for j := 4 + i; j < len(b); j += 97 + i {
					b[j] ^= 0x5A
				}
			case 2:
				copy(b[4+i:], bytes.Repeat([]byte{0xFF}, 64))
			}
			a, err := DecodeInput(context.Background(), backends.Request{Data: b}, Want{Rate: 16000, MaxSeconds: 2})
			if err != nil && !errors.Is(err, backends.ErrInvalid) {
				t.Fatalf("%s corruption %d: error does not wrap ErrInvalid: %v", c.name, i, err)
			}
			if err == nil && a.Seconds() > 2+0.01 {
				t.Fatalf("%s corruption %d: %.2f s accepted over a 2 s limit", c.name, i, a.Seconds())
			}
		}
	}
}

// Random damage (seeded, so every run is the same): byte overwrites,
// truncations and inserted runs of zeros or 0xFF over small files of every
// format, a few thousand of them, each a 400 or a decode within the limit.
func TestDecodeInputMutatedCodecs(t *testing.T) {
	needSndfile(t)
	var seeds [][]byte
	for _, c := range uploadFormats {
		seeds = append(seeds, encoded(t, c.format, c.rate, 0.05))
	}
	rng := rand.New(rand.NewPCG(14, 1))
	for i := range 3000 {
		b := mutate(rng, seeds[i%len(seeds)])
		a, err := DecodeInput(context.Background(), backends.Request{Data: b}, Want{Rate: 16000, MaxSeconds: 1})
		if err != nil && !errors.Is(err, backends.ErrInvalid) {
			t.Fatalf("mutation %d: error does not wrap ErrInvalid: %v", i, err)
		}
		if err == nil && a.Seconds() > 1+0.01 {
			t.Fatalf("mutation %d: %.2f s accepted over a 1 s limit", i, a.Seconds())
		}
	}
}

// Speech in every output format: the right content type, and the bytes
// decode back to the synthesised duration. pcm is OpenAI's 24 kHz unless
// sample_rate says otherwise; aac is AAC-LC in ADTS (FFmpeg's encoder),
// decoded back through the av shim; another format is refused naming
// what works.
func TestEncodeTTSFormats(t *testing.T) {
	needSndfile(t)
	needAV(t)
	in := sine(22050, 300, 1.5, 8000) // espeak's rate, which neither opus nor pcm use
	for format, ct := range map[string]string{
		"wav":  "audio/wav",
		"mp3":  "audio/mpeg",
		"opus": "audio/ogg; codecs=opus",
		"flac": "audio/flac",
		"aac":  "audio/aac",
		"pcm":  "audio/pcm; rate=24000; encoding=s16le; channels=1",
	} {
		r, err := ParseTTS([]byte(`{"text":"hi","format":"` + format + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		out, err := EncodeTTS(context.Background(), r, 22050, in)
		if err != nil || out.ContentType != ct {
			t.Fatalf("%s: content type %q, %v; want %q", format, out.ContentType, err, ct)
		}
		var a Audio
		if format == "pcm" {
			a, err = Decode(out.Data, 24000)
		} else {
			a, err = Decode(out.Data, 0)
		}
		if err != nil || math.Abs(a.Seconds()-1.5) > 0.1 {
			t.Fatalf("%s: decoded %.3f s at %d Hz, %v", format, a.Seconds(), a.Rate, err)
		}
		// The middle half: aac in ADTS starts with the encoder's priming
		// (1024 samples of near silence), which no header trims.
		mid := a.Samples[len(a.Samples)/4 : 3*len(a.Samples)/4]
		if z := crossings(mid); math.Abs(float64(z)*float64(a.Rate)/float64(len(mid))-600) > 30 {
			t.Fatalf("%s: %d zero crossings: not the tone", format, z)
		}
	}
	r, err := ParseTTS([]byte(`{"text":"hi","format":"pcm","sample_rate":16000}`))
	if err != nil || r.SampleRate != 16000 {
		t.Fatalf("pcm with sample_rate 16000: %+v, %v", r, err)
	}
	for _, bad := range []string{`{"text":"hi","format":"aiff"}`, `{"text":"hi","format":"m4a"}`} {
		if _, err := ParseTTS([]byte(bad)); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), SpeechFormats) {
			t.Fatalf("%s: %v, want ErrInvalid naming %s", bad, err, SpeechFormats)
		}
	}
}

// Encoding stops when the context ends.
func TestEncodeStopsWhenContextEnds(t *testing.T) {
	needSndfile(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, _, err := Encode(ctx, "flac", 16000, sine(16000, 300, 10, 8000)); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// BenchmarkCodecs measures encoding and decoding 10 s of 16 kHz speech-band
// audio in each format against WAV, in one run.
func BenchmarkCodecs(b *testing.B) {
	needSndfile(b)
	in := sine(16000, 300, 10, 8000)
	for _, format := range []string{"wav", "flac", "mp3", "opus"} {
		enc := func() []byte {
			if format == "wav" {
				return WAV(16000, in)
			}
			out, _, _, err := Encode(context.Background(), format, 16000, in)
			if err != nil {
				b.Fatal(err)
			}
			return out
		}
		data := enc()
		b.Run("encode/"+format, func(b *testing.B) {
			for b.Loop() {
				enc()
			}
			b.ReportMetric(float64(len(data)), "bytes")
		})
		b.Run("decode/"+format, func(b *testing.B) {
			for b.Loop() {
				if _, err := DecodeInput(context.Background(), backends.Request{Data: data}, Want{Rate: 16000, MaxSeconds: 60}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A FLAC whose STREAMINFO says its length is unknown (total samples 0) is
// not refused from the header, so the decode loop's own bound refuses it
// once the decoded frames pass the limit, as for an MP3's estimate.
func TestDecodeInputCodecUnknownLengthBoundedByLoop(t *testing.T) {
	needSndfile(t)
	b := encoded(t, sndfile.FormatFLAC|sndfile.SubPCM16, 16000, 8)
	if string(b[:4]) != "fLaC" || b[4]&0x7F != 0 {
		t.Fatalf("not a FLAC with STREAMINFO first: % x", b[:8])
	}
	b[21] &= 0xF0 // the 36-bit total sample count
	clear(b[22:26])
	r, err := sndfile.Open(context.Background(), bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	frames := r.Info().Frames
	r.Close()
	if frames > 0 && frames < sndfile.CountMax {
		t.Fatalf("libsndfile still states %d frames", frames)
	}
	_, err = DecodeInput(context.Background(), backends.Request{Data: b}, Want{Rate: 16000, MaxSeconds: 5})
	if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "longer than this model's limit of 5 s") {
		t.Fatalf("got %v, want the limit refused while decoding", err)
	}
	a, err := DecodeInput(context.Background(), backends.Request{Data: b}, Want{Rate: 16000, MaxSeconds: 9})
	if err != nil || math.Abs(a.Seconds()-8) > 0.01 {
		t.Fatalf("within the limit: %.3f s, %v", a.Seconds(), err)
	}
}

// Every speech format is the same bytes for the same samples: encoded
// twice in one process, with another encoding between (libsndfile drew a
// random Ogg serial per file until the encoder replaced it; FFmpeg's ADTS
// muxer and LAME write no time or random bytes). The streamed writer
// (CodecWriter) gives Encode's bytes as well.
func TestEncodeTTSDeterministic(t *testing.T) {
	needSndfile(t)
	needAV(t)
	in := sine(22050, 300, 2, 8000)
	other := sine(22050, 500, 1, 6000)
	for _, format := range []string{"mp3", "opus", "flac", "aac"} {
		enc := func(s []int16) []byte {
			b, _, _, err := Encode(context.Background(), format, 22050, s)
			if err != nil {
				t.Fatalf("%s: %v", format, err)
			}
			return b
		}
		a := enc(in)
		enc(other)
		if b := enc(in); !bytes.Equal(a, b) {
			t.Errorf("%s: two encodings of the same samples differ (%d and %d bytes)", format, len(a), len(b))
		}
		if format == "aac" {
			continue // FFmpeg's encoder takes the whole input; no CodecWriter
		}
		w, err := NewCodecWriter(context.Background(), format, 22050)
		if err != nil {
			t.Fatal(err)
		}
		for p := in; len(p) > 0; p = p[min(len(p), 5000):] {
			if err := w.Write(p[:min(len(p), 5000)]); err != nil {
				t.Fatal(err)
			}
		}
		b, _, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the streamed writer's bytes differ from Encode's (%d and %d bytes)", format, len(a), len(b))
		}
	}
}

// mutate returns a copy of seed with one to eight seeded damages: a byte
// changed, the file cut, zeros or 0xFF bytes inserted (the upload fuzz
// tests' mutations).
func mutate(rng *rand.Rand, seed []byte) []byte {
	b := bytes.Clone(seed)
	for range 1 + rng.IntN(8) {
		p := rng.IntN(len(b))
		switch rng.IntN(4) {
		case 0:
			b[p] = byte(rng.IntN(256))
		case 1:
			b = b[:p+1]
		case 2:
			b = append(b[:p], append(make([]byte, rng.IntN(64)), b[p:]...)...)
		case 3:
			b = append(b[:p], append(bytes.Repeat([]byte{0xFF}, rng.IntN(64)), b[p:]...)...)
		}
	}
	return b
}
