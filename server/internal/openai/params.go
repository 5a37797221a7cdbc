package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// The OpenAI wire shapes of the task endpoints: their bodies and form
// fields, checked and mapped onto the engine requests of backends/audio,
// and the engine results rendered as OpenAI answers them.

// SpeechParams is the JSON body of POST /v1/audio/speech.
type SpeechParams struct {
	Model          string  `json:"model"`
	Input          string  `json:"input"`
	Voice          Voice   `json:"voice,omitempty"`
	Instructions   string  `json:"instructions,omitempty"`    // must be empty: no engine here takes instructions
	ResponseFormat string  `json:"response_format,omitempty"` // wav (default here), mp3, opus, aac, flac or pcm (24 kHz)
	Speed          float64 `json:"speed,omitempty"`
	StreamFormat   string  `json:"stream_format,omitempty"` // "audio": the bytes as synthesised; "sse": speech.audio.delta events
	SampleRate     int     `json:"sample_rate,omitempty"`   // extension: output rate; OpenAI's pcm is 24000
}

// Request converts p into the engine request (Input is an audio.TTSRequest). A
// format nothing here can encode (aiff, or aac without FFmpeg's libraries)
// is invalid, naming those that work.
func (p SpeechParams) Request() (backends.Request, error) {
	if p.Model == "" {
		return backends.Request{}, backends.InvalidParam("model", "model is required")
	}
	if strings.TrimSpace(p.Input) == "" {
		return backends.Request{}, backends.InvalidParam("input", "input is empty: send the text to speak")
	}
	if p.Instructions != "" {
		// OpenAI's instructions steer gpt-4o-mini-tts; flite and espeak
		// have nothing to steer, so taking them would ignore them silently.
		return backends.Request{}, backends.InvalidParam("instructions", "instructions is not supported: the speech engines here cannot be instructed (send it empty or not at all)")
	}
	if !audio.ValidFormat(p.ResponseFormat) {
		return backends.Request{}, backends.InvalidParam("response_format", "response_format %.64q is not supported (%s)", p.ResponseFormat, audio.SpeechFormats)
	}
	if p.Speed != 0 && (p.Speed < 0.25 || p.Speed > 4) {
		return backends.Request{}, backends.InvalidParam("speed", "speed %v outside 0.25..4", p.Speed)
	}
	if r := p.SampleRate; r != 0 && (r < audio.MinOutputRate || r > audio.MaxOutputRate) {
		return backends.Request{}, backends.InvalidParam("sample_rate", "sample_rate %d outside %d..%d", r, audio.MinOutputRate, audio.MaxOutputRate)
	}
	switch p.StreamFormat {
	case "":
	case "audio", "sse":
		// Streamed audio is PCM as it is synthesised (after a WAV header
		// for wav); mp3, opus, aac and flac are encoded whole.
		if f := p.ResponseFormat; f != "" && f != "wav" && f != "pcm" {
			return backends.Request{}, backends.InvalidParam("response_format", "response_format %q cannot be streamed (stream_format %q streams wav or pcm; omit stream_format for %s)", f, p.StreamFormat, f)
		}
	default:
		return backends.Request{}, backends.InvalidParam("stream_format", "stream_format %.64q is not supported (audio or sse)", p.StreamFormat)
	}
	t := audio.TTSRequest{Text: p.Input, Voice: string(p.Voice), Format: p.ResponseFormat, Speed: p.Speed, SampleRate: p.SampleRate}
	return t.Request(p.StreamFormat != "")
}

// Voice is the voice of a speech request: a name, or the object
// {"id": name} (the openai SDK's form for custom voices), decoded
// strictly; either means the name.
type Voice string

// UnmarshalJSON takes a string or {"id": string}; anything else is
// invalid, naming voice.
func (v *Voice) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*v = Voice(s)
		return nil
	}
	var o struct {
		ID *string `json:"id"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil || o.ID == nil {
		// A type error names its field: the server's strict decoding
		// answers it as a 400 with param voice.
		return &json.UnmarshalTypeError{Value: clip(string(b)) + " (a voice is a name or {\"id\": name})", Type: reflect.TypeFor[string]()}
	}
	*v = Voice(*o.ID)
	return nil
}

// TranscriptionParams are the fields of POST /v1/audio/transcriptions
// that shape the request and the answer.
type TranscriptionParams struct {
	Model          string
	ResponseFormat string // "", json, text, verbose_json, srt or vtt
	Language       string // as the client sent it; the engine checks it
	Words          bool   // timestamp_granularities[] includes word
	Stream         bool
	Prompt         string  // whisper's initial prompt (the engine bounds it in tokens)
	Temperature    float64 // 0..1; above 0 samples (whisper)
	Task           string  // "" (transcribe) or audio.TaskTranslate (POST /v1/audio/translations)
	VADFilter      *bool   // vad_filter: decode only the speech a VAD finds (whisper); nil: the model's default
	// Hotwords is a request extension (not OpenAI's): phrases to bias
	// the decoder toward, "/" between phrases (sherpa-onnx's transducers
	// with modified_beam_search; any other engine refuses it: its input
	// has no such field).
	Hotwords string
}

// MaxHotwordsBytes bounds the hotwords field.
const MaxHotwordsBytes = 4096

// MaxPromptBytes bounds a prompt before any engine tokenizes it: OpenAI's
// 224-token bound (which whisper checks in tokens) is far under it.
const MaxPromptBytes = 4096

// TranscriptionFields lists the form fields (or query parameters) the
// endpoint accepts; any other is invalid (ParseTranscription).
var TranscriptionFields = []string{"model", "response_format", "language", "timestamp_granularities[]", "stream", "temperature", "prompt", "vad_filter", "hotwords"}

// ParseTranscription checks the fields of a transcription request, so
// that none is silently ignored: each takes effect or is invalid, naming
// it. prompt (at most MaxPromptBytes; whisper bounds it at 224 tokens)
// and temperature (0..1) go to the engine, which refuses what it cannot
// honour (audio.AudioRequest.CheckPlain). timestamp_granularities[] (word,
// segment) needs verbose_json; stream answers json or text formats only.
func ParseTranscription(fields map[string][]string) (TranscriptionParams, error) {
	var p TranscriptionParams
	for name, vs := range fields {
		if name == "timestamp_granularities" {
			name = "timestamp_granularities[]"
		}
		if !slices.Contains(TranscriptionFields, name) {
			return p, backends.InvalidParam(clip(name), "field %q is not supported (accepted: %s)", clip(name), strings.Join(TranscriptionFields, ", "))
		}
		if len(vs) > 1 && name != "timestamp_granularities[]" {
			return p, backends.InvalidParam(name, "field %q is given %d times", name, len(vs))
		}
		v := vs[0]
		switch name {
		case "model":
			p.Model = v
		case "response_format":
			p.ResponseFormat = v
		case "language":
			p.Language = v
		case "timestamp_granularities[]":
			for _, g := range vs {
				switch g {
				case "word":
					p.Words = true
				case "segment":
				default:
					return p, backends.InvalidParam("timestamp_granularities[]", "timestamp_granularities[] %q is not supported (word or segment)", clip(g))
				}
			}
		case "stream":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return p, backends.InvalidParam("stream", "stream %q is not a boolean", clip(v))
			}
			p.Stream = b
		case "temperature", "prompt", "vad_filter":
			if err := p.setCommon(name, v); err != nil {
				return p, err
			}
		case "hotwords":
			if len(v) > MaxHotwordsBytes {
				return p, backends.InvalidParam("hotwords", "hotwords is %d bytes, over %d", len(v), MaxHotwordsBytes)
			}
			p.Hotwords = v
		}
	}
	switch p.ResponseFormat {
	case "", "json", "text", "verbose_json", "srt", "vtt":
	default:
		return p, backends.InvalidParam("response_format", "response_format %q is not supported (json, text, verbose_json, srt or vtt)", clip(p.ResponseFormat))
	}
	if _, ok := fields["timestamp_granularities[]"]; (ok || fields["timestamp_granularities"] != nil) && p.ResponseFormat != "verbose_json" {
		return p, backends.InvalidParam("timestamp_granularities[]", "timestamp_granularities[] needs response_format verbose_json")
	}
	if p.Stream && p.ResponseFormat != "" && p.ResponseFormat != "json" && p.ResponseFormat != "text" {
		return p, backends.InvalidParam("stream", "stream needs response_format json or text, not %q", p.ResponseFormat)
	}
	return p, nil
}

// setCommon sets temperature, prompt or vad_filter, the fields
// transcriptions and translations share: temperature a number in 0..1
// (OpenAI's range; an engine that cannot sample refuses above 0), prompt
// at most MaxPromptBytes (whisper refuses over 224 tokens; other engines
// refuse any), vad_filter a boolean (Sluice's extension: whisper decodes
// only the speech its Silero VAD finds; other engines refuse true).
func (p *TranscriptionParams) setCommon(name, v string) error {
	switch name {
	case "temperature":
		if v == "" {
			return nil
		}
		t, err := strconv.ParseFloat(v, 64)
		if err != nil || !(t >= 0 && t <= 1) {
			return backends.InvalidParam("temperature", "temperature %q is not a number in 0..1", clip(v))
		}
		p.Temperature = t
	case "prompt":
		if len(v) > MaxPromptBytes {
			return backends.InvalidParam("prompt", "prompt is %d bytes, over %d (whisper takes at most 224 tokens)", len(v), MaxPromptBytes)
		}
		p.Prompt = v
	case "vad_filter":
		if v == "" {
			return nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return backends.InvalidParam("vad_filter", "vad_filter %q is not a boolean", clip(v))
		}
		p.VADFilter = &b
	}
	return nil
}

// TranslationFields lists the form fields POST /v1/audio/translations
// accepts (OpenAI's: no language, no timestamp granularities, no stream).
var TranslationFields = []string{"model", "response_format", "temperature", "prompt", "vad_filter"}

// ParseTranslation checks the fields of a translation request as
// ParseTranscription does; the result asks for the translate task.
func ParseTranslation(fields map[string][]string) (TranscriptionParams, error) {
	p := TranscriptionParams{Task: audio.TaskTranslate}
	for name, vs := range fields {
		if !slices.Contains(TranslationFields, name) {
			return p, backends.InvalidParam(clip(name), "field %q is not supported by translations (accepted: %s)", clip(name), strings.Join(TranslationFields, ", "))
		}
		if len(vs) > 1 {
			return p, backends.InvalidParam(name, "field %q is given %d times", name, len(vs))
		}
		switch v := vs[0]; name {
		case "model":
			p.Model = v
		case "response_format":
			p.ResponseFormat = v
		default:
			if err := p.setCommon(name, v); err != nil {
				return p, err
			}
		}
	}
	switch p.ResponseFormat {
	case "", "json", "text", "verbose_json", "srt", "vtt":
	default:
		return p, backends.InvalidParam("response_format", "response_format %q is not supported (json, text, verbose_json, srt or vtt)", clip(p.ResponseFormat))
	}
	return p, nil
}

// Input is the engine input of p: in (a declared sample rate, or nil)
// with the language, task, prompt, temperature and VAD filter asked, if
// any.
func (p TranscriptionParams) Input(in json.RawMessage) (json.RawMessage, error) {
	if p.Language == "" && p.Prompt == "" && p.Temperature == 0 && p.Task == "" && p.VADFilter == nil && p.Hotwords == "" {
		return in, nil
	}
	var r audio.AudioRequest
	if len(in) > 0 {
		if err := audio.DecodeStrict(in, &r); err != nil {
			return nil, err
		}
	}
	r.Language, r.Prompt, r.Temperature, r.Task, r.VADFilter = p.Language, p.Prompt, p.Temperature, p.Task, p.VADFilter
	// hotwords goes beside AudioRequest's fields, not among them: an
	// engine that decodes its input strictly into an AudioRequest refuses
	// it, naming it, rather than ignoring it.
	return json.Marshal(struct {
		audio.AudioRequest
		Hotwords string `json:"hotwords,omitempty"`
	}{r, p.Hotwords})
}

// VoiceActivityFields lists the form fields (or query parameters) POST
// /v1/audio/voice-activity accepts; any other is invalid
// (ParseVoiceActivity).
var VoiceActivityFields = []string{"model", "response_format", "threshold", "min_speech_ms", "min_silence_ms", "speech_pad_ms"}

// ParseVoiceActivity checks the fields of a voice-activity request, so
// that none is silently ignored: model names the model; response_format
// may only be json (the one answer there is); threshold, min_speech_ms,
// min_silence_ms and speech_pad_ms override the checkpoint's defaults
// (the engine checks their ranges); a field sent empty is as if not sent.
// It returns the model and the engine
// input: in (a {"sample_rate":N} from a declared audio/L16 payload, or
// nil) with those overrides.
func ParseVoiceActivity(fields map[string][]string, in json.RawMessage) (model string, input json.RawMessage, err error) {
	var r audio.VADRequest
	if len(in) > 0 {
		if err := audio.DecodeStrict(in, &r); err != nil {
			return "", nil, err
		}
	}
	set := false
	for name, vs := range fields {
		if !slices.Contains(VoiceActivityFields, name) {
			return "", nil, backends.InvalidParam(clip(name), "field %q is not supported (accepted: %s)", clip(name), strings.Join(VoiceActivityFields, ", "))
		}
		if len(vs) > 1 {
			return "", nil, backends.InvalidParam(name, "field %q is given %d times", name, len(vs))
		}
		v := vs[0]
		if v == "" && name != "model" {
			continue // sent empty: the default, as not sending it
		}
		switch name {
		case "model":
			model = v
		case "response_format":
			if v != "json" {
				return "", nil, backends.InvalidParam("response_format", "response_format %q is not supported (voice activity answers json)", clip(v))
			}
		case "threshold":
			t, err := strconv.ParseFloat(v, 64)
			if err != nil || !(t > 0 && t < 1) {
				return "", nil, backends.InvalidParam("threshold", "threshold %q is not a number in (0, 1)", clip(v))
			}
			r.Threshold, set = t, true
		default: // the millisecond fields
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return "", nil, backends.InvalidParam(name, "%s %q is not a positive whole number of milliseconds", name, clip(v))
			}
			switch name {
			case "min_speech_ms":
				r.MinSpeechMS = n
			case "min_silence_ms":
				r.MinSilenceMS = n
			case "speech_pad_ms":
				r.SpeechPadMS = n
			}
			set = true
		}
	}
	if !set {
		return model, in, nil
	}
	b, err := json.Marshal(r)
	return model, b, err
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// segments of r: the engine's, or one spanning the audio for an engine
// that reports none.
func segments(r audio.ASRResult) []audio.ASRSegment {
	if r.Segments != nil || r.Text == "" {
		return r.Segments
	}
	return []audio.ASRSegment{{Start: 0, End: r.Duration, Text: r.Text}}
}

// TranscriptionBody renders an ASR Output as POST
// /v1/audio/transcriptions answers it for p's response_format: json
// (default), text, verbose_json (segments; words with the word
// granularity), srt or vtt (one cue per segment).
func TranscriptionBody(out backends.Output, p TranscriptionParams) (contentType string, body []byte, err error) {
	var r audio.ASRResult
	if err := json.Unmarshal(out.JSON, &r); err != nil {
		return "", nil, fmt.Errorf("transcription output: %w", err)
	}
	switch p.ResponseFormat {
	case "", "json":
		b, err := json.Marshal(map[string]string{"text": r.Text})
		return "application/json", b, err
	case "text":
		return "text/plain; charset=utf-8", []byte(r.Text + "\n"), nil
	case "verbose_json":
		type segment struct {
			ID          int     `json:"id"`
			Seek        int     `json:"seek"`
			Start       float64 `json:"start"`
			End         float64 `json:"end"`
			Text        string  `json:"text"`
			Tokens      []int   `json:"tokens"`
			Temperature float64 `json:"temperature"`
		}
		segs := []segment{}
		for _, s := range segments(r) {
			segs = append(segs, segment{ID: s.ID, Start: s.Start, End: s.End, Text: s.Text, Tokens: []int{}})
		}
		task := audio.TaskTranscribe
		if r.Task == audio.TaskTranslate {
			task = audio.TaskTranslate
		}
		v := map[string]any{"task": task, "language": audio.LanguageName(r.Language), "duration": r.Duration, "text": r.Text, "segments": segs}
		if r.LanguageProbability > 0 {
			// Extension (not in OpenAI's answer): the detected language's
			// probability, when the engine detected it (whisper).
			v["language_probability"] = r.LanguageProbability
		}
		if p.Words {
			v["words"] = append([]audio.Word{}, r.Words...)
		}
		b, err := json.Marshal(v)
		return "application/json", b, err
	case "srt", "vtt":
		return "text/plain; charset=utf-8", Subtitles(segments(r), p.ResponseFormat == "vtt"), nil
	}
	return "", nil, backends.InvalidParam("response_format", "response_format %q is not supported (json, text, verbose_json, srt or vtt)", clip(p.ResponseFormat))
}

// Subtitles renders segments as SubRip (numbered cues, 00:00:01,250) or,
// with vtt, WebVTT (a WEBVTT header, 00:00:01.250).
func Subtitles(segs []audio.ASRSegment, vtt bool) []byte {
	var b strings.Builder
	sep := ","
	if vtt {
		b.WriteString("WEBVTT\n\n")
		sep = "."
	}
	for i, s := range segs {
		if !vtt {
			fmt.Fprintf(&b, "%d\n", i+1)
		}
		fmt.Fprintf(&b, "%s --> %s\n%s\n\n", cueTime(s.Start, sep), cueTime(s.End, sep), s.Text)
	}
	return []byte(b.String())
}

// cueTime formats seconds as HH:MM:SS<sep>mmm.
func cueTime(sec float64, sep string) string {
	ms := int64(math.Round(max(sec, 0) * 1000))
	return fmt.Sprintf("%02d:%02d:%02d%s%03d", ms/3600000, ms/60000%60, ms/1000%60, sep, ms%1000)
}

// TranscriptEvents turns a streamed ASR chunk into the server-sent events
// OpenAI's transcription stream has: an audio.TranscriptDelta (whisper, as it
// decodes) is one transcript.text.delta ({type, delta}); the final
// audio.ASRResult is transcript.text.done ({type, text}), after one delta per
// segment unless its deltas went out already (Streamed).
func TranscriptEvents(chunk json.RawMessage) ([][]byte, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(chunk, &probe); err != nil {
		return nil, fmt.Errorf("transcription chunk: %w", err)
	}
	if _, ok := probe["delta"]; ok {
		var d audio.TranscriptDelta
		if err := json.Unmarshal(chunk, &d); err != nil {
			return nil, fmt.Errorf("transcription chunk: %w", err)
		}
		b, err := json.Marshal(map[string]string{"type": "transcript.text.delta", "delta": d.Delta})
		return [][]byte{b}, err
	}
	var r audio.ASRResult
	if err := json.Unmarshal(chunk, &r); err != nil {
		return nil, fmt.Errorf("transcription chunk: %w", err)
	}
	if r.Streamed {
		b, err := json.Marshal(map[string]string{"type": "transcript.text.done", "text": r.Text})
		return [][]byte{b}, err
	}
	var evs [][]byte
	for i, s := range segments(r) {
		d := s.Text
		if i > 0 {
			d = " " + d
		}
		b, err := json.Marshal(map[string]string{"type": "transcript.text.delta", "delta": d})
		if err != nil {
			return nil, err
		}
		evs = append(evs, b)
	}
	b, err := json.Marshal(map[string]string{"type": "transcript.text.done", "text": r.Text})
	return append(evs, b), err
}
