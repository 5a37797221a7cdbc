package openai

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/sse"
)

// Speech serves POST /v1/audio/speech: JSON {model, input, voice,
// instructions (empty only), response_format wav|mp3|opus|aac|flac|pcm, speed,
// stream_format, sample_rate}; a field it cannot honour is 400 naming it
// (SpeechParams.Request, before a lease; the engine checks the voice,
// naming the model's); the answer is the audio with the engine's content
// type (audio/wav, audio/mpeg, audio/ogg; codecs=opus, audio/aac, audio/flac, or
// audio/pcm; rate=24000 unless sample_rate) or, with stream_format,
// streamed (streamSpeech).
func (h *Handlers) Speech(w http.ResponseWriter, r *http.Request) error {
	var p SpeechParams
	if err := h.d.Decode(r, &p); err != nil {
		return err
	}
	req, err := p.Request()
	if err != nil {
		return httpapi.InvalidRequest(err)
	}
	lease, err := h.d.Lease(r, p.Model, "tts")
	if err != nil {
		return err
	}
	defer lease.Release(true) // a no-op once released
	if v, ok := h.mappedVoice(lease.Model(), string(p.Voice)); ok {
		p.Voice = Voice(v)
		if req, err = p.Request(); err != nil {
			return httpapi.InvalidRequest(err)
		}
	}
	req.ID = h.d.RequestID(r.Context())
	if req.Stream {
		return h.streamSpeech(w, r, lease, req, p)
	}
	out, err := lease.Infer(r.Context(), req, nil)
	if err != nil {
		return h.d.FromRuntime(err)
	}
	if len(out.Data) == 0 {
		return &httpapi.Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "the engine produced no audio",
			Err: fmt.Errorf("model %q is not a speech model", p.Model)}
	}
	return h.d.WriteTask(w, r, lease, out.ContentType, out.Data)
}

// mappedVoice is the voice model's voice map gives voice when voice is one
// of OpenAI's stock names the map lists (CONTRACT.md names.voice-map): the
// committed config's map, read under the request's lease. Any other
// voice, or a stock name the map leaves out, goes to the engine as it is
// (a stock name then means the model's default voice).
func (h *Handlers) mappedVoice(model, voice string) (string, bool) {
	stock, ok := backends.StockVoice(voice)
	if !ok {
		return "", false
	}
	cfg, _, err := h.d.Runtime.ConfigOf(model)
	if err != nil {
		return "", false
	}
	v, ok := runtime.VoiceMapOf(&cfg)[stock]
	return v, ok
}

// streamSpeech answers /v1/audio/speech with stream_format as OpenAI
// documents it. "audio": the audio bytes as each sentence is synthesised
// (chunked; wav is a header whose sizes say "unknown", then PCM16; pcm is
// the bare samples). "sse": server-sent `speech.audio.delta` events whose
// audio is base64 of those same bytes, then one `speech.audio.done`. An
// engine failure after the first bytes ends an sse stream with an `error`
// event; a raw audio stream is aborted (the client sees a truncated
// chunked body, never a clean end).
func (h *Handlers) streamSpeech(w http.ResponseWriter, r *http.Request, lease *runtime.Lease, req backends.Request, p SpeechParams) error {
	rc := http.NewResponseController(w)
	var sw *sse.Writer // stream_format sse: the server's one event-stream writer
	if p.StreamFormat == "sse" {
		sw = sse.New(w, 0)
	}
	wav := p.ResponseFormat == "" || p.ResponseFormat == "wav"
	started := false
	start := func(rate int) {
		hd := w.Header()
		hd.Set("Sluice-Slot", strconv.Itoa(lease.Slot()))
		hd.Set("Sluice-Config-Version", strconv.FormatUint(lease.Version(), 10))
		started = true
		if sw != nil {
			sw.Start()
			return
		}
		if wav {
			hd.Set("Content-Type", "audio/wav")
		} else {
			hd.Set("Content-Type", audio.PCMContentType(rate))
		}
		hd.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
	}
	event := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return sw.Data(b)
	}
	_, err := lease.Infer(r.Context(), req, func(chunk json.RawMessage) error {
		pcm, rate, err := audio.DecodeChunk(chunk)
		if err != nil {
			return fmt.Errorf("openai: speech chunk: %w", err)
		}
		if !started {
			start(rate)
			if wav {
				pcm = append(audio.StreamHeader(rate), pcm...)
			}
		}
		if sw != nil {
			return event(map[string]string{"type": "speech.audio.delta", "audio": base64.StdEncoding.EncodeToString(pcm)})
		}
		if _, err := w.Write(pcm); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil {
		lease.Release(true)
		if !started {
			return h.d.FromRuntime(err)
		}
		if runtime.CodeOf(err) != core.CodeCancelled {
			h.d.Logger(r.Context()).Error("speech stream failed", "err", err)
			if sw == nil {
				panic(http.ErrAbortHandler) // no in-band error in raw audio
			}
			h.d.WriteErrorEvent(w, rc, nil, h.d.FromRuntime(err))
		}
		return nil
	}
	if !started { // the engine emitted nothing
		lease.Release(true)
		return &httpapi.Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "the engine produced no audio",
			Err: fmt.Errorf("model %q streamed no chunk", p.Model)}
	}
	if sw != nil { // the last event: the lease released before its last byte (phase.stream-deferred)
		b, err := json.Marshal(map[string]any{"type": "speech.audio.done", "usage": map[string]int{"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}})
		if err != nil {
			lease.Release(true)
			return fmt.Errorf("openai: speech done event: %w", err)
		}
		_ = sw.WriteReleasing(sse.AppendEvent(nil, "", "", b), func(failed bool) { lease.Release(failed) })
		return nil
	}
	// Raw audio: every byte went out with its chunk; the answer ends with
	// the chunked body's terminator, written when this returns, after the
	// release.
	werr := rc.Flush()
	lease.Release(werr != nil)
	return nil
}
