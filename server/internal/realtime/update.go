package realtime

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Session updates in both dialects of OpenAI's Realtime API (CONTRACT.md
// live.beta-session-update, live.ga-session-update): the beta's
// transcription_session.update and the GA's session.update with
// type "transcription". Both configure the same session; the GA one is
// read into the beta's shape (its fields renamed), and each is answered
// in its own dialect (transcription_session.updated, session.updated),
// its errors naming its own fields.

// gaSessionUpdate is the GA session.update.
type gaSessionUpdate struct {
	clientEvent
	Session gaSession `json:"session"`
}

// gaSession is the GA transcription session (OpenAI's
// RealtimeTranscriptionSessionCreateRequest).
type gaSession struct {
	Type    string   `json:"type"`
	Audio   *gaAudio `json:"audio,omitempty"`
	Include []string `json:"include,omitempty"`
}

type gaAudio struct {
	Input *gaInput `json:"input,omitempty"`
}

type gaInput struct {
	Format         *gaFormat       `json:"format,omitempty"`
	Transcription  *transcribeConf `json:"transcription,omitempty"`
	TurnDetection  json.RawMessage `json:"turn_detection,omitempty"`
	NoiseReduction json.RawMessage `json:"noise_reduction,omitempty"`
}

// gaFormat is the GA audio format: only {"type":"audio/pcm","rate":24000}
// (the beta's pcm16) is taken.
type gaFormat struct {
	Type string `json:"type,omitempty"`
	Rate *int   `json:"rate,omitempty"`
}

// gaParam is the GA name of a beta session field (the error events'
// param, less "session.").
func gaParam(p string) string {
	for _, m := range [...][2]string{
		{"input_audio_format", "audio.input.format"},
		{"input_audio_noise_reduction", "audio.input.noise_reduction"},
		{"input_audio_transcription", "audio.input.transcription"},
		{"turn_detection", "audio.input.turn_detection"},
	} {
		if rest, ok := strings.CutPrefix(p, m[0]); ok {
			return m[1] + rest
		}
	}
	return p
}

// updateGA checks what only the GA session.update has (its type and its
// format object) and applies the rest as the beta update would.
func (ls *liveSession) updateGA(ev gaSessionUpdate) {
	s := ev.Session
	switch s.Type {
	case "transcription":
	case "":
		ls.failUpdate(ev.EventID, "type", "invalid_value", `session.type is required: this server serves transcription sessions (type "transcription")`)
		return
	default:
		ls.failUpdate(ev.EventID, "type", "invalid_value", `session type %q is not supported: this server serves transcription sessions only (type "transcription")`, s.Type)
		return
	}
	c := sessionConfig{Include: s.Include}
	if s.Audio != nil && s.Audio.Input != nil {
		in := s.Audio.Input
		if f := in.Format; f != nil {
			if f.Type != "" && f.Type != "audio/pcm" {
				ls.failUpdate(ev.EventID, "audio.input.format.type", "invalid_value", "audio format %q is not supported; use audio/pcm (24 kHz mono)", f.Type)
				return
			}
			if f.Rate != nil && *f.Rate != Rate {
				ls.failUpdate(ev.EventID, "audio.input.format.rate", "invalid_value", "rate %d is not supported; audio/pcm is 24000 Hz", *f.Rate)
				return
			}
		}
		c.InputAudioTranscription = in.Transcription
		c.TurnDetection = in.TurnDetection
		c.InputAudioNoiseReduction = in.NoiseReduction
	}
	ls.update(ev.EventID, true, c)
}

// failUpdate sends an update's error event naming session.PARAM.
func (ls *liveSession) failUpdate(eventID, param, code, format string, args ...any) {
	e := errorEvent(code, eventID, format, args...)
	p := "session." + param
	er := e["error"].(rtError)
	er.Param = &p
	e["error"] = er
	_ = ls.send(e)
}

// update applies a session update: every field takes effect or the whole
// update is an error event naming it (nothing changes). ga names the GA
// dialect (its field names, its answer). An update naming the model of an
// unadmitted session admits it (admission.go).
func (ls *liveSession) update(eventID string, ga bool, c sessionConfig) {
	name := func(p string) string {
		if ga {
			return gaParam(p)
		}
		return p
	}
	fail := func(param, format string, args ...any) {
		ls.failUpdate(eventID, name(param), "invalid_value", format, args...)
	}
	if c.InputAudioFormat != "" && c.InputAudioFormat != "pcm16" {
		fail("input_audio_format", "input_audio_format %q is not supported; use pcm16 (24 kHz mono)", c.InputAudioFormat)
		return
	}
	if n := c.InputAudioNoiseReduction; len(n) > 0 && string(n) != "null" {
		fail("input_audio_noise_reduction", "%s is not supported (no noise reduction runs here); send null or leave it out", name("input_audio_noise_reduction"))
		return
	}
	if len(c.Include) > 0 {
		fail("include", "include %v is not supported", c.Include)
		return
	}
	ls.mu.Lock()
	lang, on, model, admitted := ls.language, ls.engineOn, ls.model, ls.lease != nil
	ls.mu.Unlock()
	newModel := ""
	if tc := c.InputAudioTranscription; tc != nil {
		switch {
		case tc.Model == "" || tc.Model == model || ls.leadsTo(tc.Model, model): // the SDKs repeat the name they admitted with, an alias too
		case admitted:
			fail("input_audio_transcription.model", "the session was admitted on model %q; it cannot change to %q", model, tc.Model)
			return
		default:
			newModel = tc.Model
		}
		if tc.Prompt != "" {
			m := orElse(newModel, model)
			if m == "" {
				fail("input_audio_transcription.prompt", "the served transcription models take no prompt")
			} else {
				fail("input_audio_transcription.prompt", "model %q takes no prompt", m)
			}
			return
		}
		if tc.Language != lang {
			if on {
				fail("input_audio_transcription.language", "the language cannot change once audio was sent")
				return
			}
			lang = tc.Language
		}
	}
	var td *turnDetection
	if t := c.TurnDetection; len(t) > 0 && string(t) != "null" {
		td = &turnDetection{}
		if err := httpapi.DecodeJSON(t, td); err != nil {
			fail("turn_detection", "%s: %s", name("turn_detection"), errMessage(err))
			return
		}
		ls.mu.Lock()
		had := ls.vad != nil
		ls.mu.Unlock()
		switch {
		case had:
			fail("turn_detection", "turn detection is already on for this session")
			return
		case on:
			fail("turn_detection", "turn detection can be turned on only before the first audio")
			return
		}
	} else if len(t) > 0 {
		ls.mu.Lock()
		had := ls.vad != nil
		ls.mu.Unlock()
		if had {
			fail("turn_detection", "turn detection cannot be turned off once on")
			return
		}
	}
	if newModel != "" {
		if e := ls.admitLate(newModel); e != nil {
			ev := errorEvent(orElse(e.Code, "invalid_value"), eventID, "%s", e.Message)
			er := ev["error"].(rtError)
			er.Type = orElse(e.Type, er.Type)
			p := "session." + name("input_audio_transcription.model")
			er.Param = &p
			ev["error"] = er
			_ = ls.send(ev)
			return
		}
	}
	if td != nil {
		if param, msg := ls.startVAD(*td); msg != "" {
			if newModel != "" {
				ls.unadmit() // the update takes effect whole or not at all
			}
			fail(param, "%s", msg)
			return
		}
	}
	if newModel != "" {
		ls.markAdmitted()
	}
	ls.mu.Lock()
	ls.language = lang
	ls.mu.Unlock()
	if ga {
		_ = ls.send(map[string]any{"type": "session.updated", "session": ls.gaSessionObject(lang)})
	} else {
		_ = ls.send(map[string]any{"type": "transcription_session.updated", "session": ls.sessionObject(lang)})
	}
}

// orElse is a, or b when a is empty.
func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sessionObject is the session as the beta's created and updated events
// show it (the model null before admission).
func (ls *liveSession) sessionObject(lang string) map[string]any {
	return map[string]any{
		"object":                      "realtime.transcription_session",
		"input_audio_format":          "pcm16",
		"input_audio_transcription":   map[string]any{"model": nullable(ls.currentModel()), "language": lang, "prompt": ""},
		"turn_detection":              ls.turnDetectionObject(),
		"input_audio_noise_reduction": nil,
		"include":                     []string{},
	}
}

// gaSessionObject is the session as the GA's session.created and
// session.updated show it.
func (ls *liveSession) gaSessionObject(lang string) map[string]any {
	return map[string]any{
		"type":   "transcription",
		"object": "realtime.transcription_session",
		"audio": map[string]any{"input": map[string]any{
			"format":          map[string]any{"type": "audio/pcm", "rate": Rate},
			"transcription":   map[string]any{"model": nullable(ls.currentModel()), "language": lang, "prompt": ""},
			"turn_detection":  ls.turnDetectionObject(),
			"noise_reduction": nil,
		}},
		"include": []string{},
	}
}

// errMessage is an error's message for an error event: an
// *httpapi.Error's own.
func errMessage(err error) string {
	var e *httpapi.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// turnDetectionObject is the session's turn_detection as events show it.
func (ls *liveSession) turnDetectionObject() any {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.vad == nil {
		return nil
	}
	return map[string]any{"type": "server_vad", "model": ls.vad.model}
}
