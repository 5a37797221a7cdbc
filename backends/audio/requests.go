package audio

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/internal/strictjson"
)

// The request and response shapes of the three speech tasks, shared by the
// engines and the HTTP layer. backends.Request carries them as follows.
//
// TTS (engines flite, espeak): Input is a TTSRequest; Data is unused. The
// result is Output.Data: a WAV file (ContentType "audio/wav"), MP3
// ("audio/mpeg"), Opus in Ogg ("audio/ogg; codecs=opus"), FLAC
// ("audio/flac") or raw PCM16LE (format "pcm", at 24 kHz unless sample_rate
// says otherwise, ContentType from PCMContentType). With
// Request.Stream each synthesised sentence goes through emit as a Chunk
// (raw PCM16LE, base64) and the final Output is empty.
//
// ASR (engine pocketsphinx): Body (or else Data) is the audio, a WAV file
// (any rate, resampled) or raw PCM16LE mono when Input's sample_rate
// declares its rate (there is no default: undeclared non-WAV audio is
// refused); Input is an optional AudioRequest. Engines read it with
// DecodeInput. Output.JSON is an ASRResult.
//
// VAD (engine onnx, Silero): Data as for ASR; Input is an optional
// VADRequest. Output.JSON is a VADResult with segments in seconds.

// MaxTextLen bounds a TTS request (characters), like OpenAI's 4096.
const MaxTextLen = 4096

// The output rates a TTS request may ask for (sample_rate; cell
// audio.output-rate): telephony's 8 kHz up to 48 kHz, the highest rate
// playback devices and codecs commonly take. The voices synthesise at
// 16..22.05 kHz, so a higher rate adds no content, only bytes: the output
// grows linearly with the rate (48 kHz keeps a MaxTextLen request's WAV
// within tens of megabytes), and rates below 8 kHz cut speech's formants.
const (
	MinOutputRate = 8000
	MaxOutputRate = 48000
)

// TTSRequest is the Input of a TTS request.
type TTSRequest struct {
	Text       string  `json:"text"`
	Voice      string  `json:"voice,omitempty"`       // "" = the checkpoint's voice
	Format     string  `json:"format,omitempty"`      // "wav" (default), "mp3", "opus", "flac" or "pcm" (24 kHz unless sample_rate)
	Speed      float64 `json:"speed,omitempty"`       // 0.25..4, 0 = 1
	SampleRate int     `json:"sample_rate,omitempty"` // resample the output to this rate; 0 = engine rate
}

// StockVoices are OpenAI's voice names, as its SDK lists them
// (backends.StockVoices). Every speech model takes each of them as its
// default voice (the voice a request without one gets), so an app written
// for OpenAI runs unchanged (IsDefaultVoice), unless the model's voice map
// maps it to another of its voices (the speech route does that before the
// engine sees the request); the model's own voices are GET
// /v1/audio/voices'.
var StockVoices = backends.StockVoices

// IsDefaultVoice reports whether a request's voice asks for the model's
// default voice: none, "default" or one of StockVoices, in any case.
func IsDefaultVoice(v string) bool {
	if v == "" || strings.EqualFold(v, "default") {
		return true
	}
	for _, s := range StockVoices {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// UnknownVoice is the refusal of a voice that is neither stock
// (IsDefaultVoice) nor one of the model's: invalid, naming voice and the
// voices the model has.
func UnknownVoice(engine, voice, checkpoint string, have []string) error {
	return backends.InvalidParam("voice", "%s: voice %.80q not in checkpoint %s (have %s; OpenAI's stock names %s mean the model's default voice)",
		engine, voice, checkpoint, strings.Join(have, ", "), strings.Join(StockVoices, ", "))
}

// AudioRequest is the optional Input of an ASR request.
type AudioRequest struct {
	SampleRate int    `json:"sample_rate,omitempty"` // declares raw PCM16LE Data at this rate; ignored for WAV
	Language   string `json:"language,omitempty"`    // ISO-639-1 (or its English name); "" = the model's; one it cannot do is invalid
	// The fields below are whisper's (an engine that cannot honour one
	// refuses it with CheckPlain): Task "translate" answers in English,
	// Prompt conditions the decoder (whisper's initial prompt),
	// Temperature above 0 samples.
	Task        string  `json:"task,omitempty"` // "" or "transcribe", or "translate"
	Prompt      string  `json:"prompt,omitempty"`
	Temperature float64 `json:"temperature,omitempty"` // 0..1
	// VADFilter (whisper) decodes only the speech regions a Silero VAD
	// finds, the silences between them cut out; nil: the checkpoint's
	// default (option vad_filter).
	VADFilter *bool `json:"vad_filter,omitempty"`
}

// Tasks of an AudioRequest.
const (
	TaskTranscribe = "transcribe"
	TaskTranslate  = "translate"
)

// CheckPlain refuses, naming the field, a request that asks for what
// only whisper does: translation, a prompt, sampling, a VAD filter.
// Engines that transcribe deterministically without a prompt
// (pocketsphinx) call it.
func (r AudioRequest) CheckPlain(engine string) error {
	switch {
	case r.Task != "" && r.Task != TaskTranscribe:
		return backends.Invalidf("%s: task %q is not supported: this model transcribes only (translation needs a multilingual whisper model)", engine, r.Task)
	case r.Prompt != "":
		return backends.Invalidf("%s: prompt is not supported: this model cannot be prompted (send it empty or not at all)", engine)
	case r.Temperature != 0:
		return backends.Invalidf("%s: temperature %g is not supported: this model decodes deterministically (only 0)", engine, r.Temperature)
	case r.VADFilter != nil && *r.VADFilter:
		return backends.Invalidf("%s: vad_filter is not supported: only a whisper model filters its input with a VAD", engine)
	}
	return nil
}

// TranscriptDelta is a chunk an ASR engine streams while it decodes (a
// whisper segment as soon as it exists): Delta is the text to append to
// what came before (a leading space between segments). The final chunk
// is the ASRResult, with Streamed set when deltas came first.
type TranscriptDelta struct {
	Delta string  `json:"delta"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

// VADRequest is the optional Input of a VAD request; zero fields take the
// checkpoint's defaults.
type VADRequest struct {
	SampleRate   int     `json:"sample_rate,omitempty"` // as AudioRequest's
	Threshold    float64 `json:"threshold,omitempty"`
	MinSpeechMS  int     `json:"min_speech_ms,omitempty"`
	MinSilenceMS int     `json:"min_silence_ms,omitempty"`
	SpeechPadMS  int     `json:"speech_pad_ms,omitempty"`
}

// ASRResult is the Output.JSON of an ASR request. Segments and Words are
// in seconds from the start of the audio, in order, within Duration.
type ASRResult struct {
	Text     string  `json:"text"`
	Duration float64 `json:"duration"`           // seconds of audio
	Language string  `json:"language,omitempty"` // ISO-639-1 code of the transcript
	// LanguageProbability is the detected language's probability (whisper,
	// when no language was asked); 0 when the language was not detected.
	LanguageProbability float64      `json:"language_probability,omitempty"`
	Task                string       `json:"task,omitempty"`     // "translate" when the text is a translation into English
	Streamed            bool         `json:"streamed,omitempty"` // the text went out as TranscriptDelta chunks first
	Segments            []ASRSegment `json:"segments,omitempty"`
	Words               []Word       `json:"words,omitempty"`
}

// ASRSegment is one stretch of the transcript (split at pauses and at
// sentence-sized lengths).
type ASRSegment struct {
	ID    int     `json:"id"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	Text  string  `json:"text"`
}

// Word is one recognised word and its time.
type Word struct {
	Word  string  `json:"word"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

// Segmenting: a pause of at least SegmentPause seconds between words, or
// a segment reaching SegmentMaxWords words or SegmentMaxSeconds, starts a
// new segment (subtitle-sized pieces).
const (
	SegmentPause      = 0.2
	SegmentMaxWords   = 24
	SegmentMaxSeconds = 10.0
)

// Segments groups words (in time order) into segments.
func Segments(words []Word) []ASRSegment {
	var out []ASRSegment
	var text []string
	flush := func(end float64) {
		if len(text) > 0 {
			out[len(out)-1].End, out[len(out)-1].Text = end, strings.Join(text, " ")
			text = text[:0]
		}
	}
	for i, w := range words {
		if len(text) > 0 {
			cur, prev := out[len(out)-1], words[i-1]
			if w.Start-prev.End >= SegmentPause || len(text) >= SegmentMaxWords || w.End-cur.Start > SegmentMaxSeconds {
				flush(prev.End)
			}
		}
		if len(text) == 0 {
			out = append(out, ASRSegment{ID: len(out), Start: w.Start})
		}
		text = append(text, w.Word)
	}
	if len(words) > 0 {
		flush(words[len(words)-1].End)
	}
	return out
}

// languageNames maps the ISO-639-1 codes the engines here transcribe to
// the English names OpenAI's verbose_json reports (and clients may send).
var languageNames = map[string]string{"en": "english"}

// LanguageName is the English name of an ISO-639-1 code (the code itself
// when it is not known).
func LanguageName(code string) string {
	if n, ok := languageNames[code]; ok {
		return n
	}
	return code
}

// CheckLanguage resolves a requested language against the ones a model
// transcribes (ISO-639-1 codes, the first its default): "" is the
// default; an ISO-639-1 code, a regional tag (en-US) or an English name
// (english) of one of them is that code; anything else is invalid, naming
// the field.
func CheckLanguage(asked string, have []string) (string, error) {
	if asked == "" && len(have) > 0 {
		return have[0], nil
	}
	a := strings.ToLower(strings.TrimSpace(asked))
	if i := strings.IndexAny(a, "-_"); i > 0 {
		a = a[:i]
	}
	for code, name := range languageNames {
		if a == name {
			a = code
		}
	}
	for _, h := range have {
		if a == h {
			return h, nil
		}
	}
	if len(asked) > 64 {
		asked = asked[:64] + "..."
	}
	return "", backends.Invalidf("language %q is not supported by this model (it transcribes %s)", asked, strings.Join(have, ", "))
}

// VADResult is the Output.JSON of a VAD request.
type VADResult struct {
	Segments []Segment `json:"segments"`
	Duration float64   `json:"duration"` // seconds of audio
}

// Segment is one stretch of speech, in seconds from the start.
type Segment struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

// Chunk is one streamed piece of TTS audio.
type Chunk struct {
	Index      int    `json:"index"`
	SampleRate int    `json:"sample_rate"`
	Audio      string `json:"audio"` // base64 of raw PCM16LE mono
}

// DecodeStrict decodes an optional JSON object into v with the server's
// strict decoder (internal/strictjson: unknown, duplicate and case-folded
// keys and trailing data refused): empty or null input leaves v as is;
// errors wrap backends.ErrInvalid and name the key at fault (ParamOf).
func DecodeStrict(in json.RawMessage, v any) error {
	t := bytes.TrimSpace(in)
	if len(t) == 0 || string(t) == "null" {
		return nil
	}
	if err := strictjson.Decode(t, v); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) && se.Code == strictjson.CodeUnknown && se.Param != "" {
			// An unknown field is one this engine does not take (hotwords
			// on an engine without biasing): the answer names it.
			return backends.InvalidParam(se.Param, "input: %s is not supported by this model (%v)", se.Param, err)
		}
		if errors.As(err, &se) && se.Param != "" {
			return backends.InvalidParam(se.Param, "input: %v", err)
		}
		return backends.Invalidf("input: %v", err)
	}
	return nil
}

// ParseTTS decodes and checks a TTS Input.
func ParseTTS(in json.RawMessage) (TTSRequest, error) {
	var r TTSRequest
	if err := DecodeStrict(in, &r); err != nil {
		return r, err
	}
	switch {
	case strings.TrimSpace(r.Text) == "":
		return r, backends.Invalidf("tts: text is empty")
	case len([]rune(r.Text)) > MaxTextLen:
		// The cost bound of speech (engine.cost-bound): text length, checked
		// before any synthesis; "input" is OpenAI's name for the text.
		return r, backends.InvalidParam("input", "tts: text longer than %d characters", MaxTextLen)
	case !ValidFormat(r.Format):
		return r, backends.Invalidf("tts: format %q is not supported (%s)", r.Format, SpeechFormats)
	case r.Speed != 0 && (r.Speed < 0.25 || r.Speed > 4):
		return r, backends.Invalidf("tts: speed %v outside 0.25..4", r.Speed)
	case r.SampleRate != 0 && (r.SampleRate < MinOutputRate || r.SampleRate > MaxOutputRate):
		return r, backends.Invalidf("tts: sample_rate %d outside %d..%d", r.SampleRate, MinOutputRate, MaxOutputRate)
	}
	if r.Speed == 0 {
		r.Speed = 1
	}
	if r.Format == "pcm" && r.SampleRate == 0 {
		r.SampleRate = PCMRate // OpenAI's pcm, whatever the engine's rate
	}
	return r, nil
}

// Request is the engine request of r: Input is r, checked as ParseTTS
// checks it (an unusable field is invalid, naming it, before any engine
// sees it); stream asks for the audio as Chunks.
func (r TTSRequest) Request(stream bool) (backends.Request, error) {
	in, err := json.Marshal(r)
	if err != nil {
		return backends.Request{}, fmt.Errorf("tts: %w", err)
	}
	if _, err := ParseTTS(in); err != nil {
		return backends.Request{}, err
	}
	return backends.Request{Input: in, Stream: stream}, nil
}

// PCMContentType is the content type of raw PCM16LE mono at rate.
func PCMContentType(rate int) string {
	return fmt.Sprintf("audio/pcm; rate=%d; encoding=s16le; channels=1", rate)
}

// EncodeTTS turns synthesised samples at rate into the Output asked for by
// r (format, output rate). Resampling a long synthesis stops when ctx
// ends, with an error wrapping ctx's.
func EncodeTTS(ctx context.Context, r TTSRequest, rate int, samples []int16) (backends.Output, error) {
	if r.SampleRate != 0 && r.SampleRate != rate {
		var err error
		if samples, err = ResampleContext(ctx, samples, rate, r.SampleRate); err != nil {
			return backends.Output{}, err
		}
		rate = r.SampleRate
	}
	switch r.Format {
	case "pcm":
		return backends.Output{Data: PCM16Bytes(samples), ContentType: PCMContentType(rate)}, nil
	case "", "wav":
	default:
		b, ct, _, err := Encode(ctx, r.Format, rate, samples)
		if err != nil {
			return backends.Output{}, err
		}
		return backends.Output{Data: b, ContentType: ct}, nil
	}
	return backends.Output{Data: WAV(rate, samples), ContentType: "audio/wav"}, nil
}

// DecodeChunk returns the PCM16LE bytes and rate of a streamed chunk.
func DecodeChunk(b json.RawMessage) ([]byte, int, error) {
	var c Chunk
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, 0, err
	}
	pcm, err := base64.StdEncoding.DecodeString(c.Audio)
	return pcm, c.SampleRate, err
}

// SplitSentences cuts text into sentence-sized pieces (at . ! ? ; : and
// newlines, and at spaces past maxLen bytes) so long syntheses can be
// streamed and cancelled between pieces. Empty pieces are dropped.
func SplitSentences(text string, maxLen int) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	rs := []rune(text)
	for i, r := range rs {
		cur.WriteRune(r)
		next := rune(' ')
		if i+1 < len(rs) {
			next = rs[i+1]
		}
		switch {
		case r == '\n':
			flush()
		case strings.ContainsRune(".!?;:", r) && (next == ' ' || next == '\n' || next == '\t'):
			flush()
		case r == ' ' && cur.Len() >= maxLen:
			flush()
		}
	}
	flush()
	return out
}
