// Package espeak is the eSpeak NG text-to-speech engine (Debian
// libespeak-ng1 with espeak-ng-data), loaded with purego. eSpeak NG keeps
// its state in process globals (data path, voice, parameters, callback), so
// the engine has no parallel factory: every checkpoint admits exactly one
// slot (ParallelAdmission is 0 for every checkpoint), Validate refuses more with an error
// wrapping backends.ErrInvalid, Clone always fails, and all sessions of the
// process take turns on one lock.
//
// Requests: see backends/audio (TTS); the output is 22.05 kHz unless
// sample_rate asks for another. Checkpoints: a catalogue folder whose
// manifest names engine "espeak"; options data (the espeak-ng-data folder,
// relative to the checkpoint), voice (an espeak voice or language, e.g.
// "en-us"), variant (a voice variant appended to every voice; the default
// checkpoint's "sluice-steady" makes the output depend on the request
// alone, see catalogue.EspeakSteadyVariant) and wpm (words per minute,
// 80..450, default 175).
//
// A bad data path makes espeak_Initialize call exit(1), so Validate checks
// the data files first and the engine initialises through
// espeak_ng_Initialize, which reports errors instead.
//
// Threading rule: the Engine is safe for concurrent use; a session is used
// by one goroutine at a time; every library call is serialised.
package espeak

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

// Name is the engine name model specs use.
const Name = "espeak"

// ParallelAdmission returns the slot ceiling of a checkpoint: 0 (one slot)
// for every one, because the library's state is process-global.
func ParallelAdmission(string) int { return 0 }

// Memory estimate: the phoneme data and one dictionary, shared (measured
// under 4 MB).
const estimateMB = 8

// Options are the engine options of an espeak model.
type Options struct {
	Data    string `json:"data"`
	Voice   string `json:"voice"`
	Variant string `json:"variant,omitempty"` // voice variant added to every voice (voices/!v/NAME)
	WPM     int    `json:"wpm,omitempty"`
}

// Engine is the espeak engine.
type Engine struct{}

// New returns the espeak engine.
func New() *Engine { return &Engine{} }

// Available reports whether libespeak-ng can be loaded.
func Available() error {
	_, err := load()
	return err
}

// Name implements backends.Engine.
func (e *Engine) Name() string { return Name }

type config struct {
	name    string
	data    string          // absolute espeak-ng-data folder
	voice   string          // default voice
	variant string          // "" or the variant appended to every voice
	voices  map[string]bool // lower-case voice names and languages present in data
	wpm     int

	list []backends.Voice // one per voice file under data/lang (Voices)
}

// maxSlots is every checkpoint's ceiling (see ParallelAdmission).
func maxSlots(name string) int { return max(1, ParallelAdmission(name)) }

// resolve checks spec and the data files without the library.
func resolve(spec backends.Spec) (config, error) {
	var o Options
	cp, err := catalogue.EngineOptions(spec, Name, "tts", &o)
	if err != nil {
		return config{}, err
	}
	if o.WPM == 0 {
		o.WPM = rateNormal
	}
	if o.WPM < rateMin || o.WPM > rateMax {
		return config{}, backends.Invalidf("espeak: wpm %d outside %d..%d", o.WPM, rateMin, rateMax)
	}
	if o.Data == "" || o.Voice == "" {
		return config{}, backends.Invalidf("espeak: options data and voice are required")
	}
	data, err := cp.File(o.Data)
	if err != nil {
		return config{}, fmt.Errorf("espeak: %w", err)
	}
	c := config{name: cp.Name, data: data, voice: strings.ToLower(o.Voice), variant: o.Variant, wpm: o.WPM}
	if err := checkData(&c); err != nil {
		return config{}, err
	}
	return c, nil
}

// checkData checks the files espeak-ng reads at initialisation and for the
// voice, and lists the voices, so that nothing reaches the library's exit(1)
// or its silent fallback to the system data path.
func checkData(c *config) error {
	for _, f := range []string{"phontab", "phonindex", "phondata", "intonations"} {
		st, err := os.Stat(filepath.Join(c.data, f))
		if err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
			return backends.Invalidf("espeak: data file %s/%s is missing or empty", c.data, f)
		}
	}
	c.voices = map[string]bool{}
	dicts := map[string]string{} // voice or language -> dictionary
	err := filepath.WalkDir(filepath.Join(c.data, "lang"), func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		names, dict := readVoice(p)
		c.list = append(c.list, backends.Voice{ID: strings.ToLower(d.Name()), Languages: append([]string{}, names...), SampleRate: outputRate})
		for _, n := range append(names, strings.ToLower(d.Name())) {
			c.voices[n] = true
			dicts[n] = dict
		}
		return nil
	})
	if err != nil || len(c.voices) == 0 {
		return backends.Invalidf("espeak: no voices under %s/lang", c.data)
	}
	if !c.voices[c.voice] {
		return backends.Invalidf("espeak: voice %q not in %s (have %s)", c.voice, c.data, strings.Join(c.voiceList(), ", "))
	}
	if c.variant != "" {
		if err := catalogue.CheckRelPath(c.variant); err != nil || strings.Contains(c.variant, "/") {
			return backends.Invalidf("espeak: variant %q is not a plain name", c.variant)
		}
		p := filepath.Join(c.data, "voices", "!v", c.variant)
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			return backends.Invalidf("espeak: voice variant file %s is missing", p)
		}
	}
	dict := filepath.Join(c.data, dicts[c.voice]+"_dict")
	if st, err := os.Stat(dict); err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		return backends.Invalidf("espeak: dictionary %s for voice %q is missing or empty", dict, c.voice)
	}
	return checkDict(dict)
}

// readVoice returns the lower-case names and languages a voice file
// declares and its dictionary name.
func readVoice(p string) ([]string, string) {
	fh, err := os.Open(p)
	if err != nil {
		return nil, ""
	}
	defer fh.Close()
	var names []string
	dict := ""
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "language":
			lang := strings.ToLower(f[1])
			names = append(names, lang)
			if dict == "" {
				dict, _, _ = strings.Cut(lang, "-")
			}
		case "dictionary":
			dict = f[1]
		}
	}
	return names, dict
}

func (c config) voiceList() []string {
	var out []string
	for v := range c.voices {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// outputRate is espeak-ng's synthesis rate (what espeak_ng_GetSampleRate
// answers once initialised), the output rate when a request asks none.
const outputRate = 22050

// Voices implements backends.VoiceLister: every voice file of the
// checkpoint's data, sorted by ID; the model's voice is marked default
// (and listed first when it names a file rather than a language).
func (e *Engine) Voices(spec backends.Spec) ([]backends.Voice, error) {
	c, err := resolve(spec)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(c.list)
	slices.SortFunc(out, func(a, b backends.Voice) int { return strings.Compare(a.ID, b.ID) })
	for i := range out {
		if out[i].ID == c.voice {
			out[i].Default = true
			v := out[i]
			copy(out[1:i+1], out[:i])
			out[0] = v
			return out, nil
		}
	}
	// The model's voice is a language: say so first, at the same rate.
	return append([]backends.Voice{{ID: c.voice, Languages: []string{c.voice}, SampleRate: outputRate, Default: true}}, out...), nil
}

// Validate implements backends.Engine: Check without its estimate. Any
// slot count above one is refused with ErrInvalid, which the runtime
// answers 400 while keeping the existing pool (contract: unsupported
// capacity on an existing registration, T16).
func (e *Engine) Validate(spec backends.Spec) error {
	_, err := e.Check(spec)
	return err
}

// Check implements backends.Engine, from one resolve of the spec: the
// slot count (one), the library and its one data path.
func (e *Engine) Check(spec backends.Spec) (int64, error) {
	c, err := resolve(spec)
	if err != nil {
		return 0, err
	}
	if n := maxSlots(c.name); spec.Slots < 1 || spec.Slots > n {
		return 0, backends.Invalidf("espeak: eSpeak NG keeps process-global state and has no parallel factory: checkpoint %s admits %d slot, asked for %d", c.name, n, spec.Slots)
	}
	l, err := load()
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dataPath != "" && l.dataPath != c.data {
		return 0, errOtherData(l.dataPath, c.data)
	}
	return estimateMB, nil
}

// Open implements backends.Engine. It advertises capacity 1 (contract: slot
// counts are further limited by the session's advertised capacity, and a
// model without a parallel factory supports one slot); a spec asking
// for more slots still opens (the runtime compares the capacity with the
// slots and refuses the load as invalid), but Validate refuses it first.
func (e *Engine) Open(ctx context.Context, spec backends.Spec) (backends.Session, int, error) {
	c, err := resolve(spec)
	if err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	l, err := load()
	if err != nil {
		return nil, 0, err
	}
	l.mu.Lock()
	loaded := l.dataPath == c.data
	l.mu.Unlock()
	if !loaded {
		// engine.load-safety: a data folder's first load runs in a child.
		if err := childCheck(ctx, spec, c); err != nil {
			return nil, 0, err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.open(c.data); err != nil {
		return nil, 0, err
	}
	return &session{lib: l, cfg: c}, maxSlots(c.name), nil
}

// Probe implements backends.Engine without touching the process-global
// state: it validates and reports the capacity.
func (e *Engine) Probe(ctx context.Context, spec backends.Spec) (int, error) {
	c, err := resolve(spec)
	if err != nil {
		return 0, err
	}
	if err := Available(); err != nil {
		return 0, err
	}
	return maxSlots(c.name), nil
}

// session is the one slot of a model.
type session struct {
	lib    *lib
	cfg    config
	closed bool
}

// Clone implements backends.Session: there is no second session.
func (s *session) Clone(ctx context.Context, index int) (backends.Session, error) {
	return nil, backends.Invalidf("espeak: eSpeak NG has no parallel factory; checkpoint %s admits one slot", s.cfg.name)
}

// Infer implements backends.Session. Cancellation aborts the synthesis at
// the next audio buffer (the callback returns 1).
func (s *session) Infer(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	if s.closed {
		return backends.Output{}, fmt.Errorf("espeak: session is closed")
	}
	r, err := audio.ParseTTS(req.Input)
	if err != nil {
		return backends.Output{}, err
	}
	voice, err := s.voiceFor(r.Voice)
	if err != nil {
		return backends.Output{}, err
	}
	wpm := min(rateMax, max(rateMin, int(float64(s.cfg.wpm)*r.Speed+0.5)))
	var abort atomic.Bool
	stop := context.AfterFunc(ctx, func() { abort.Store(true) })
	defer stop()
	var all []int16
	chunks := audio.NewChunkEmitter(ctx, emit, r)
	for _, sentence := range audio.SplitSentences(r.Text, 300) {
		if err := ctx.Err(); err != nil {
			return backends.Output{}, err
		}
		s.lib.mu.Lock()
		samples, err := s.lib.synth(s.espeakVoice(voice), wpm, sentence, &abort)
		rate := s.lib.rate
		s.lib.mu.Unlock()
		if err != nil {
			return backends.Output{}, err
		}
		if err := ctx.Err(); err != nil {
			return backends.Output{}, err
		}
		samples = steadyTail(samples, rate)
		if req.Stream && emit != nil {
			if err := chunks.Write(rate, samples); err != nil {
				return backends.Output{}, err
			}
			continue
		}
		all = append(all, samples...)
	}
	if req.Stream && emit != nil {
		return backends.Output{}, chunks.Close()
	}
	return audio.EncodeTTS(ctx, r, s.lib.rate, all)
}

// sentencePause is the silence that ends every synthesised sentence.
const sentencePause = 0.25 // seconds

// steadyTail replaces the trailing silence of a sentence with a fixed
// pause. eSpeak NG ends an utterance with a run of zero samples whose
// length depends on the previous request (generator state it keeps in
// static variables), so the same text would end with a different amount
// of silence; trimming the exact zeros and adding a fixed pause makes the
// output depend on the request alone.
func steadyTail(samples []int16, rate int) []int16 {
	n := len(samples)
	for n > 0 && samples[n-1] == 0 {
		n--
	}
	return append(samples[:n], make([]int16, int(sentencePause*float64(rate)))...)
}

// espeakVoice is the name given to espeak: the voice plus the variant.
func (s *session) espeakVoice(v string) string {
	if s.cfg.variant == "" {
		return v
	}
	return v + "+" + s.cfg.variant
}

// voiceFor maps a request's voice to an espeak voice of this checkpoint:
// "" and OpenAI's stock names mean the model's voice.
func (s *session) voiceFor(v string) (string, error) {
	if audio.IsDefaultVoice(v) {
		return s.cfg.voice, nil
	}
	v = strings.ToLower(v)
	if !s.cfg.voices[v] {
		return "", audio.UnknownVoice("espeak", v, s.cfg.name, s.cfg.voiceList())
	}
	return v, nil
}

// Close implements backends.Session. The library stays initialised for the
// next session on the same data.
func (s *session) Close(ctx context.Context) error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.lib.mu.Lock()
	s.lib.sessions--
	s.lib.mu.Unlock()
	return nil
}
