package sherpa_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/sherpa"
)

// ttsRequests are the matched-output requests of the TTS families: texts
// of one and several sentences, every voice of the multi-speaker model,
// speeds, a resampled rate and each format.
func ttsRequests(voices ...string) []backends.Request {
	var out []backends.Request
	add := func(r audio.TTSRequest) {
		b, _ := json.Marshal(r)
		out = append(out, backends.Request{ID: string(b), Input: b})
	}
	add(audio.TTSRequest{Text: "Hello world."})
	add(audio.TTSRequest{Text: "The quick brown fox jumps over the lazy dog. It was not amused! Was it?", Speed: 1.5})
	add(audio.TTSRequest{Text: "Sluice serves speech models.", Speed: 0.5, SampleRate: 16000, Format: "pcm"})
	add(audio.TTSRequest{Text: "One, two, three.", Format: "flac", SampleRate: 48000})
	for _, v := range voices {
		add(audio.TTSRequest{Text: "Each speaker says this sentence.", Voice: v})
	}
	return out
}

// asrRequests: real speech (jfk.wav), silence, and declared raw PCM.
func asrRequests(t *testing.T) []backends.Request {
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatal(err)
	}
	a, err := audio.ParseWAV(wav)
	if err != nil {
		t.Fatal(err)
	}
	head := audio.PCM16Bytes(a.To(16000).Samples[:16000*3])
	return []backends.Request{
		{ID: "jfk", Data: wav},
		{ID: "silence", Data: audio.WAV(16000, make([]int16, 8000))},
		{ID: "raw-8k", Input: []byte(`{"sample_rate":8000}`), Data: audio.PCM16Bytes(a.To(8000).Samples[:8000*2])},
		{ID: "head", Input: []byte(`{"sample_rate":16000}`), Data: head},
	}
}

// streamedTwice is jfk.wav twice (22 s) as a streamed request.
func streamedTwice(t *testing.T) backends.Request {
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatal(err)
	}
	a, err := audio.ParseWAV(wav)
	if err != nil {
		t.Fatal(err)
	}
	return backends.Request{ID: "jfk-twice-stream", Data: audio.WAV(a.Rate, append(append([]int16(nil), a.Samples...), a.Samples...)), Stream: true}
}

// diarizationRequests: jfk.wav free, with a fixed count and with bounds.
func diarizationRequests(t *testing.T) []backends.Request {
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatal(err)
	}
	a, err := audio.ParseWAV(wav)
	if err != nil {
		t.Fatal(err)
	}
	ks, _ := json.Marshal(map[string]any{"num_speakers": 2, "known_speakers": []audio.KnownSpeaker{{Name: "ask", Audio: audio.WAV(16000, a.Samples[16000*5:16000*8])}}})
	var out []backends.Request
	for _, in := range []string{`{}`, `{"num_speakers":2}`, `{"min_speakers":3}`, `{"max_speakers":2}`, string(ks), `{"embedding":true}`} {
		out = append(out, backends.Request{ID: in[:min(len(in), 40)], Data: wav, Input: []byte(in)})
	}
	return out
}

// TestMatchedOutputs: every family answers byte-identically at 1, 2 and 4
// slots with as many concurrent clients, in any order of earlier requests
// (the contract's matched-output cell, as make validate-engines checks it).
func TestMatchedOutputs(t *testing.T) {
	root := sherpa.TestRoot(t)
	eng := sherpa.New(sherpa.Config{})
	cases := []struct {
		name string
		reqs []backends.Request
	}{
		{sherpa.PiperSynthetic, ttsRequests()},
		{sherpa.PiperMultiSynthetic, ttsRequests("amy", "bob", "cleo")},
		{sherpa.KokoroSynthetic, ttsRequests("af_synth", "am_synth")},
		{sherpa.MatchaSynthetic, ttsRequests()},
		{sherpa.MatchaVocosSynthetic, ttsRequests()},
		{sherpa.KokoroMultiSynthetic, append(ttsRequests("af_synth", "ef_synth", "zf_synth"), kokoroMultiRequests()...)},
		{sherpa.KittenSynthetic, ttsRequests("expr-voice-2-m", "expr-voice-3-m")},
		{sherpa.NemoCTCSynthetic, asrRequests(t)},
		{sherpa.TransducerSynthetic, asrRequests(t)},
		{sherpa.ParakeetSynthetic, asrRequests(t)},
		{sherpa.SenseVoiceSynthetic, asrRequests(t)},
		{sherpa.ParaformerSynthetic, asrRequests(t)},
		{sherpa.WhisperSynthetic, asrRequests(t)},
		{sherpa.MoonshineSynthetic, asrRequests(t)},
		{sherpa.MoonshineV2Synthetic, asrRequests(t)},
		{sherpa.CanarySynthetic, asrRequests(t)},
		{sherpa.StreamingSynthetic, asrRequests(t)},
		{sherpa.OnlineNemoCTCSynthetic, asrRequests(t)},
		{sherpa.OnlineParaformerSynthetic, asrRequests(t)},
		{sherpa.DiarizationSynthetic, diarizationRequests(t)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cp, err := catalogue.Load(filepath.Join(root, c.name))
			if err != nil {
				t.Fatal(err)
			}
			spec := engines.SpecFor(c.name, cp, 1)
			spec.Options = []byte(`{"oversubscribe":true}`)
			rows, err := engines.Matched(context.Background(), eng, spec, c.name, c.reqs, []int{1, 2, 4}, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if r.Status() != "ok" {
					t.Errorf("%d slots: %s (%d of %d matched; %v %v)", r.Slots, r.Status(), r.Matched, r.Requests, r.Refused, r.Err)
				}
			}
		})
	}
}

// kokoroMultiRequests: the multi-language Kokoro's voices each in their
// language, and Chinese (the lexicon) in one.
func kokoroMultiRequests() []backends.Request {
	var out []backends.Request
	for _, r := range []audio.TTSRequest{
		{Text: "Hola amigos, buenos días. ¿Cómo estáis?", Voice: "ef_synth"},
		{Text: "你好世界。Hello world.", Voice: "zf_synth"},
		{Text: "Hello, sluice world!", Voice: "af_synth", Speed: 1.2},
	} {
		b, _ := json.Marshal(r)
		out = append(out, backends.Request{ID: string(b), Input: b})
	}
	return out
}

// TestMatchedHotwords: the transducers with modified_beam_search answer
// requests with and without hotwords identically at 1, 2 and 4 slots in
// any order (each stream's hotwords graph is its own).
func TestMatchedHotwords(t *testing.T) {
	root := sherpa.TestRoot(t)
	eng := sherpa.New(sherpa.Config{})
	reqs := asrRequests(t)
	for _, r := range asrRequests(t)[:2] {
		r.ID += "+hotwords"
		r.Input = []byte(`{"hotwords":"j :20/l :20/t h e"}`)
		reqs = append(reqs, r)
	}
	for _, name := range []string{sherpa.TransducerSynthetic, sherpa.StreamingSynthetic} {
		cp, err := catalogue.Load(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		spec := engines.SpecFor(name, cp, 1)
		spec.Options = []byte(`{"oversubscribe":true,"decoding_method":"modified_beam_search"}`)
		rows, err := engines.Matched(context.Background(), eng, spec, name, reqs, []int{1, 2, 4}, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Status() != "ok" {
				t.Errorf("%s, %d slots: %s (%d of %d matched; %v %v)", name, r.Slots, r.Status(), r.Matched, r.Requests, r.Refused, r.Err)
			}
		}
	}
}

// TestHistoryIndependence: every synthetic checkpoint through the engine
// contract's history harness (engines.History, contract E1): each
// request's answer from one fresh one-slot pool is the reference, and at
// 1, 2 and 4 slots two seeded shuffled orders of all requests (the TTS
// ones with engines.HistoryInputs' pairs, lengths, speeds and rates
// interleaved) answer it byte for byte whatever came before.
func TestHistoryIndependence(t *testing.T) {
	root := sherpa.TestRoot(t)
	eng := sherpa.New(sherpa.Config{})
	inputs := map[string][]backends.Request{"tts": ttsRequests(), "asr": asrRequests(t), "diarization": diarizationRequests(t)[:3]}
	// The streaming families also get a streamed upload long enough for
	// an endpoint (jfk.wav twice, 22 s): its deltas and final compared
	// byte for byte.
	online := map[string][]backends.Request{"asr": append(asrRequests(t), streamedTwice(t))}
	for _, name := range sherpa.SyntheticNames {
		t.Run(name, func(t *testing.T) {
			cp, err := catalogue.Load(filepath.Join(root, name))
			if err != nil {
				t.Fatal(err)
			}
			spec := engines.SpecFor(name, cp, 1)
			spec.Options = []byte(`{"oversubscribe":true}`)
			in := inputs
			if slices.Contains([]string{sherpa.StreamingSynthetic, sherpa.StreamingBPESynthetic, sherpa.OnlineNemoCTCSynthetic, sherpa.OnlineParaformerSynthetic}, name) {
				in = online
			}
			rows, err := engines.History(context.Background(), eng, spec, name, engines.HistoryInputs(in, cp.Task), engines.HistoryOptions{Slots: []int{1, 2, 4}, Orders: 2, Seed: 31})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				t.Logf("%d slots, %d orders: %d of %d answers equal to the fresh pool's", r.Slots, r.Orders, r.Matched, r.Requests)
				if r.Status() != "ok" {
					t.Errorf("%d slots: %s (%d of %d equal; differ %v; %v %v)", r.Slots, r.Status(), r.Matched, r.Requests, r.Differs, r.Refused, r.Err)
				}
			}
		})
	}
}

// TestLanguageHistory: the history harness (engines.History, contract
// E1) on the models that take a language per request, with requests in
// more languages than a slot keeps recognizers for, in seeded shuffled
// orders: each answer equals a fresh one-slot pool's whatever languages
// came before, at 1, 2 and 4 slots.
func TestLanguageHistory(t *testing.T) {
	root := sherpa.TestRoot(t)
	eng := sherpa.New(sherpa.Config{})
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatal(err)
	}
	langs := map[string][]string{
		sherpa.SenseVoiceSynthetic:   {"", "en", "zh", "ja", "ko", "yue", "auto"},
		sherpa.CanarySynthetic:       {"", "es", "de", "fr", "en"},
		sherpa.WhisperMultiSynthetic: {"", "en", "de", "es", "fr", "auto"},
	}
	for name, ls := range langs {
		t.Run(name, func(t *testing.T) {
			cp, err := catalogue.Load(filepath.Join(root, name))
			if err != nil {
				t.Fatal(err)
			}
			var reqs []backends.Request
			for _, l := range ls {
				in, _ := json.Marshal(map[string]string{"language": l})
				reqs = append(reqs, backends.Request{ID: "lang-" + l, Data: wav, Input: in})
			}
			spec := engines.SpecFor(name, cp, 1)
			spec.Options = []byte(`{"oversubscribe":true}`)
			rows, err := engines.History(context.Background(), eng, spec, name, reqs, engines.HistoryOptions{Slots: []int{1, 2, 4}, Orders: 3, Seed: 31})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if r.Status() != "ok" {
					t.Errorf("%d slots: %s (%d of %d equal; differ %v; %v %v)", r.Slots, r.Status(), r.Matched, r.Requests, r.Differs, r.Refused, r.Err)
				}
			}
		})
	}
}
