package audio

import (
	"encoding/json"
	"fmt"

	"github.com/sluice-dev/sluice/backends"
)

// The OpenAI-compatible task endpoints map onto backends.Request here, so
// the HTTP layer only decodes bodies and writes answers.

// SpeechParams is the JSON body of POST /v1/audio/speech.
type SpeechParams struct {
	Model          string  `json:"model"`
	Input          string  `json:"input"`
	Voice          string  `json:"voice,omitempty"`
	Instructions   string  `json:"instructions,omitempty"`    // accepted, not used by these engines
	ResponseFormat string  `json:"response_format,omitempty"` // wav (default here), mp3, opus, flac or pcm (24 kHz)
	Speed          float64 `json:"speed,omitempty"`
	StreamFormat   string  `json:"stream_format,omitempty"` // "audio": the bytes as synthesised; "sse": speech.audio.delta events
	SampleRate     int     `json:"sample_rate,omitempty"`   // extension: output rate; OpenAI's pcm is 24000
}

// Request converts p into the engine request (Input is a TTSRequest). A
// format nothing here can encode (aac) is invalid, naming those that work.
func (p SpeechParams) Request() (backends.Request, error) {
	if !validFormat(p.ResponseFormat) {
		return backends.Request{}, backends.Invalidf("response_format %q is not supported (%s)", p.ResponseFormat, SpeechFormats)
	}
	switch p.StreamFormat {
	case "":
	case "audio", "sse":
		// Streamed audio is PCM as it is synthesised (after a WAV header
		// for wav); mp3, opus and flac are encoded whole.
		if f := p.ResponseFormat; f != "" && f != "wav" && f != "pcm" {
			return backends.Request{}, backends.Invalidf("response_format %q cannot be streamed (stream_format %q streams wav or pcm; omit stream_format for %s)", f, p.StreamFormat, f)
		}
	default:
		return backends.Request{}, backends.Invalidf("stream_format %q is not supported (audio or sse)", p.StreamFormat)
	}
	t := TTSRequest{Text: p.Input, Voice: p.Voice, Format: p.ResponseFormat, Speed: p.Speed, SampleRate: p.SampleRate}
	in, err := json.Marshal(t)
	if err != nil {
		return backends.Request{}, err
	}
	if _, err := ParseTTS(in); err != nil {
		return backends.Request{}, err
	}
	return backends.Request{Input: in, Stream: p.StreamFormat != ""}, nil
}

// TranscriptionBody renders an ASR Output as POST
// /v1/audio/transcriptions answers it for response_format json (default),
// text or verbose_json.
func TranscriptionBody(out backends.Output, responseFormat string) (contentType string, body []byte, err error) {
	var r ASRResult
	if err := json.Unmarshal(out.JSON, &r); err != nil {
		return "", nil, fmt.Errorf("transcription output: %w", err)
	}
	switch responseFormat {
	case "", "json":
		b, err := json.Marshal(map[string]string{"text": r.Text})
		return "application/json", b, err
	case "text":
		return "text/plain; charset=utf-8", []byte(r.Text + "\n"), nil
	case "verbose_json":
		b, err := json.Marshal(map[string]any{
			"task": "transcribe", "language": "english", "duration": r.Duration, "text": r.Text,
			"segments": []map[string]any{{"id": 0, "start": 0, "end": r.Duration, "text": r.Text}},
		})
		return "application/json", b, err
	}
	return "", nil, backends.Invalidf("response_format %q is not supported (json, text or verbose_json)", responseFormat)
}
