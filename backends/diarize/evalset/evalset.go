// Package evalset builds multi-speaker evaluation recordings with their
// reference RTTM from the distinct voices that are real here: flite's
// compiled-in slt (US female), awb (Scottish male), rms (US male) and kal
// (US male diphone, 8 kHz, resampled), and two eSpeak NG voices (en-us
// with the espeak-en checkpoint's variants sluice-female and sluice-low);
// and, to measure the method's limits, one voice used twice and kal
// against kal16 (the same man). Each recording is a sequence of
// non-overlapping turns of varied length (one to three sentences), each
// by a voice other than the last one's, separated by silences of 50 ms to
// 1.2 s (some shorter than a VAD's minimum silence, so that a speech
// region can hold a speaker change), with a per-turn gain of -6..0 dB and
// a speed of 0.85..1.15. The reference turn is the synthesised speech
// with its leading and trailing silence trimmed.
//
// A Set is fully determined by its Spec (a seeded PCG), so the dev split
// (DevSeed) and the scored split (TestSeed) never share a recording.
//
// Threading rule: Generate is safe for concurrent use; it opens its own
// flite sessions.
package evalset

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/diarize/der"
	"github.com/sluice-dev/sluice/backends/espeak"
	"github.com/sluice-dev/sluice/backends/flite"
)

// Rate is the sample rate of every recording.
const Rate = 16000

// Voices are the distinct flite voices the standard sets draw from.
var Voices = []string{"slt", "awb", "rms", "kal"}

// SameVoice is two speakers with one voice (slt twice, each turn at its
// own speed and gain): a set of them measures what the method cannot do.
var SameVoice = []string{"slt", "slt"}

// TwoChannels is one man through two channels: kal (8 kHz diphones,
// resampled) and kal16 (16 kHz diphones) are the same speaker's
// recordings, told apart by their bandwidth.
var TwoChannels = []string{"kal", "kal16"}

// allVoices are the flite voices a Generator opens.
var allVoices = []string{"slt", "awb", "rms", "kal", "kal16"}

// EspeakVoices are the eSpeak NG voices AddEspeak opens: en-us with the
// espeak-en checkpoint's steady variants sluice-female and sluice-low
// (catalogue.EspeakVariants), one synthesiser with two voices.
var EspeakVoices = map[string]string{"espeak-female": "sluice-female", "espeak-low": "sluice-low"}

// Mixed is the voices of the mixed set: a flite voice and the two eSpeak
// NG voices.
var Mixed = []string{"rms", "espeak-female", "espeak-low"}

// Seeds of the two splits: thresholds are tuned on DevSeed sets only; the
// benchmark scores TestSeed sets.
const (
	DevSeed  = 1
	TestSeed = 2
)

// Spec describes one set.
type Spec struct {
	Name       string
	Speakers   int     // 1..len(Voices)
	Recordings int     // how many recordings
	Seconds    float64 // each recording is at least this long (turns are added until it is)
	Seed       uint64
	// Voices, when set, are the voices to use (all of them, Speakers
	// ignored); else Speakers voices are drawn from Voices.
	Voices []string
}

// Recording is one evaluation recording.
type Recording struct {
	Name    string
	Samples []int16 // mono at Rate
	Ref     []der.Turn
}

// WAV returns the recording as a WAV file.
func (r Recording) WAV() []byte { return audio.WAV(Rate, r.Samples) }

// RTTM returns the reference as RTTM lines.
func (r Recording) RTTM() string { return der.FormatRTTM(r.Name, r.Ref) }

// Seconds is the recording's duration.
func (r Recording) Seconds() float64 { return float64(len(r.Samples)) / Rate }

// Standard returns the benchmark's sets for seed: 2, 3 and 4 speakers,
// short (about 30 s, 6 recordings) and long (about 3 minutes, 2
// recordings), then SameVoice, TwoChannels and Mixed (6 short recordings
// each; Mixed needs AddEspeak).
func Standard(seed uint64) []Spec {
	var out []Spec
	for _, n := range []int{2, 3, 4} {
		out = append(out,
			Spec{Name: fmt.Sprintf("%dspk-short", n), Speakers: n, Recordings: 6, Seconds: 30, Seed: seed*100 + uint64(n)},
			Spec{Name: fmt.Sprintf("%dspk-long", n), Speakers: n, Recordings: 2, Seconds: 180, Seed: seed*100 + 10 + uint64(n)})
	}
	return append(out, Spec{Name: "same-voice", Speakers: 2, Recordings: 6, Seconds: 30, Seed: seed*100 + 20, Voices: SameVoice},
		Spec{Name: "two-channels", Speakers: 2, Recordings: 6, Seconds: 30, Seed: seed*100 + 21, Voices: TwoChannels},
		Spec{Name: "mixed-3spk", Speakers: 3, Recordings: 6, Seconds: 30, Seed: seed*100 + 22, Voices: Mixed})
}

// Generator speaks with one session per voice: flite's, then eSpeak NG's
// once AddEspeak opened them.
type Generator struct {
	sessions []backends.Session
	names    []string // the voice of each session
}

// NewGenerator opens a flite session per voice.
func NewGenerator(ctx context.Context) (*Generator, error) {
	g := &Generator{}
	for _, v := range allVoices {
		s, _, err := flite.New().Open(ctx, backends.Spec{Task: "tts", Checkpoint: v, Slots: 1})
		if err != nil {
			g.Close(ctx)
			return nil, fmt.Errorf("evalset: flite voice %s: %w", v, err)
		}
		g.sessions = append(g.sessions, s)
		g.names = append(g.names, v)
	}
	return g, nil
}

// AddEspeak opens the EspeakVoices from the espeak-en checkpoint folder
// (a models root's, as `make models` builds it). eSpeak NG is
// process-global: its sessions take turns, and the process must use no
// other espeak data folder.
func (g *Generator) AddEspeak(ctx context.Context, checkpoint string) error {
	for _, name := range []string{"espeak-female", "espeak-low"} {
		opts, _ := json.Marshal(map[string]string{"voice": "en-us", "variant": EspeakVoices[name]})
		s, _, err := espeak.New().Open(ctx, backends.Spec{Task: "tts", Engine: espeak.Name, Checkpoint: checkpoint, Options: opts, Slots: 1})
		if err != nil {
			return fmt.Errorf("evalset: espeak voice %s: %w", name, err)
		}
		g.sessions = append(g.sessions, s)
		g.names = append(g.names, name)
	}
	return nil
}

// Close closes the sessions.
func (g *Generator) Close(ctx context.Context) {
	for _, s := range g.sessions {
		_ = s.Close(ctx)
	}
	g.sessions = nil
}

// Generate builds the recordings of spec.
func (g *Generator) Generate(ctx context.Context, spec Spec) ([]Recording, error) {
	var fixed []int
	for _, v := range spec.Voices {
		i := slices.Index(g.names, v)
		if i < 0 {
			return nil, fmt.Errorf("evalset: voice %q not open (have %v; AddEspeak opens eSpeak NG's)", v, g.names)
		}
		fixed = append(fixed, i)
	}
	if len(fixed) == 0 && (spec.Speakers < 1 || spec.Speakers > len(Voices)) {
		return nil, fmt.Errorf("evalset: %d speakers, have %d voices", spec.Speakers, len(Voices))
	}
	rng := rand.New(rand.NewPCG(spec.Seed, 0x5eed))
	var out []Recording
	for i := range spec.Recordings {
		// Which voices speak: the fixed ones, or a random choice of
		// spec.Speakers distinct voices.
		perm := fixed
		if len(perm) == 0 {
			perm = rng.Perm(len(Voices))[:spec.Speakers]
		}
		rec, err := g.recording(ctx, rng, fmt.Sprintf("%s-%02d", spec.Name, i), perm, spec.Seconds)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

func (g *Generator) recording(ctx context.Context, rng *rand.Rand, name string, voices []int, seconds float64) (Recording, error) {
	rec := Recording{Name: name}
	// Reference names: the voice's, with "-2" for a voice used twice.
	names := make([]string, len(voices))
	for i, v := range voices {
		names[i] = g.names[v]
		if slices.Contains(voices[:i], v) {
			names[i] += "-2"
		}
	}
	silence := func(sec float64) { rec.Samples = append(rec.Samples, make([]int16, int(sec*Rate))...) }
	silence(0.3 + 0.5*rng.Float64())
	last := -1
	// Every voice speaks at least once: the first turns go round them.
	order := rng.Perm(len(voices))
	for t := 0; t < len(voices) || rec.Seconds() < seconds; t++ {
		if err := ctx.Err(); err != nil {
			return Recording{}, err
		}
		var v int
		if t < len(order) {
			v = order[t]
		} else {
			for v = rng.IntN(len(voices)); v == last && len(voices) > 1; v = rng.IntN(len(voices)) {
			}
		}
		last = v
		text := make([]string, 1+rng.IntN(3))
		for k := range text {
			text[k] = Sentences[rng.IntN(len(Sentences))]
		}
		speed := 0.85 + 0.3*rng.Float64()
		gain := 0.5 + 0.5*rng.Float64()
		pcm, err := g.speak(ctx, voices[v], strings.Join(text, " "), speed)
		if err != nil {
			return Recording{}, err
		}
		pcm = trim(pcm)
		start := rec.Seconds()
		for _, s := range pcm {
			rec.Samples = append(rec.Samples, int16(float64(s)*gain))
		}
		rec.Ref = append(rec.Ref, der.Turn{Speaker: names[v], Start: start, End: rec.Seconds()})
		// Gaps: a fifth are 50..150 ms (inside one VAD region), the rest 0.3..1.2 s.
		if rng.IntN(5) == 0 {
			silence(0.05 + 0.1*rng.Float64())
		} else {
			silence(0.3 + 0.9*rng.Float64())
		}
	}
	silence(0.5)
	return rec, nil
}

// speak synthesises text with voice index v at Rate.
func (g *Generator) speak(ctx context.Context, v int, text string, speed float64) ([]int16, error) {
	in, err := json.Marshal(audio.TTSRequest{Text: text, Speed: speed, SampleRate: Rate})
	if err != nil {
		return nil, err
	}
	o, err := g.sessions[v].Infer(ctx, backends.Request{Input: in}, nil)
	if err != nil {
		return nil, fmt.Errorf("evalset: flite %s: %w", g.names[v], err)
	}
	a, err := audio.ParseWAV(o.Data)
	if err != nil {
		return nil, err
	}
	if a.Rate != Rate {
		return nil, fmt.Errorf("evalset: flite %s spoke at %d Hz, want %d", g.names[v], a.Rate, Rate)
	}
	return a.Samples, nil
}

// trim drops leading and trailing near-silence (below 1% of full scale in
// every 10 ms frame).
func trim(pcm []int16) []int16 {
	const frame = Rate / 100
	loud := func(f []int16) bool {
		for _, s := range f {
			if s > 327 || s < -327 {
				return true
			}
		}
		return false
	}
	a, b := 0, len(pcm)
	for a+frame <= b && !loud(pcm[a:a+frame]) {
		a += frame
	}
	for b-frame >= a && !loud(pcm[b-frame:b]) {
		b -= frame
	}
	return pcm[a:b]
}
