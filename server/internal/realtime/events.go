package realtime

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// The wire of GET /v1/realtime (CONTRACT.md "Live sessions"): the
// transcription-session subset of OpenAI's Realtime API (the GA
// session.update is update.go's).
// Client events are decoded strictly (an unknown field is an error event
// naming it, never ignored); server events carry an event_id of their own.

// Rate is the sample rate of OpenAI's "pcm16" input format: 24 kHz,
// 16-bit little-endian, mono.
const Rate = 24000

// clientEvent is the part every client event has.
type clientEvent struct {
	Type    string `json:"type"`
	EventID string `json:"event_id,omitempty"`
}

// appendEvent is input_audio_buffer.append.
type appendEvent struct {
	clientEvent
	Audio string `json:"audio"`
}

// sessionUpdate is transcription_session.update.
type sessionUpdate struct {
	clientEvent
	Session sessionConfig `json:"session"`
}

// sessionConfig is the session object of transcription_session.update
// and of the server's created and updated events. Every field takes
// effect or is refused: a field Sluice cannot honour is an error event.
type sessionConfig struct {
	InputAudioFormat        string          `json:"input_audio_format,omitempty"`
	InputAudioTranscription *transcribeConf `json:"input_audio_transcription,omitempty"`
	// TurnDetection: null (the default here; OpenAI's is server_vad) or
	// {"type":"server_vad", ...}, see turnDetection.
	TurnDetection            json.RawMessage `json:"turn_detection,omitempty"`
	InputAudioNoiseReduction json.RawMessage `json:"input_audio_noise_reduction,omitempty"`
	Include                  []string        `json:"include,omitempty"`
}

type transcribeConf struct {
	Model    string `json:"model,omitempty"`
	Language string `json:"language,omitempty"`
	Prompt   string `json:"prompt,omitempty"`
}

// turnDetection is server_vad's settings. Model names the Sluice VAD
// model that finds the turns (a Sluice field; default: the server's
// --realtime-vad-model).
type turnDetection struct {
	Type              string   `json:"type"`
	Threshold         *float64 `json:"threshold,omitempty"`
	PrefixPaddingMS   *int     `json:"prefix_padding_ms,omitempty"`
	SilenceDurationMS *int     `json:"silence_duration_ms,omitempty"`
	Model             string   `json:"model,omitempty"`
}

// rtError is the error object of an error event.
type rtError struct {
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	EventID *string `json:"event_id"`
}

// errorEvent builds an error event about the client event with ID ev ("" for
// none).
func errorEvent(code, ev, format string, args ...any) map[string]any {
	e := rtError{Type: "invalid_request_error", Code: code, Message: fmt.Sprintf(format, args...)}
	if ev != "" {
		e.EventID = &ev
	}
	return map[string]any{"type": "error", "error": e}
}

// decodeAudio decodes an append's base64 PCM16 into samples.
func decodeAudio(b64 string) ([]int16, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("audio is not valid base64: %w", err)
	}
	if len(raw)%2 != 0 {
		return nil, fmt.Errorf("audio has %d bytes, not whole 16-bit samples", len(raw))
	}
	s := make([]int16, len(raw)/2)
	for i := range s {
		s[i] = int16(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8)
	}
	return s, nil
}

// nullable is s as a JSON string, or nil (null) when it is empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
