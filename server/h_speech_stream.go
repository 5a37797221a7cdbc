package server

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
)

// streamSpeech answers /v1/audio/speech with stream_format as OpenAI
// documents it. "audio": the audio bytes as each sentence is synthesised
// (chunked; wav is a header whose sizes say "unknown", then PCM16; pcm is
// the bare samples). "sse": server-sent `speech.audio.delta` events whose
// audio is base64 of those same bytes, then one `speech.audio.done`. An
// engine failure after the first bytes ends an sse stream with an `error`
// event; a raw audio stream is aborted (the client sees a truncated
// chunked body, never a clean end).
func (s *Server) streamSpeech(w http.ResponseWriter, r *http.Request, lease *runtime.Lease, req backends.Request, p audio.SpeechParams) error {
	rc := http.NewResponseController(w)
	sse := p.StreamFormat == "sse"
	wav := p.ResponseFormat == "" || p.ResponseFormat == "wav"
	started := false
	var buf []byte
	start := func(rate int) {
		h := w.Header()
		switch {
		case sse:
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
		case wav:
			h.Set("Content-Type", "audio/wav")
		default:
			h.Set("Content-Type", audio.PCMContentType(rate))
		}
		h.Set("X-Accel-Buffering", "no")
		h.Set("Sluice-Slot", strconv.Itoa(lease.Slot()))
		h.Set("Sluice-Config-Version", strconv.FormatUint(lease.Version(), 10))
		w.WriteHeader(http.StatusOK)
		started = true
	}
	event := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		buf = append(append(append(buf[:0], "data: "...), b...), "\n\n"...)
		_, err = w.Write(buf)
		return err
	}
	_, err := lease.Infer(r.Context(), req, func(chunk json.RawMessage) error {
		pcm, rate, err := audio.DecodeChunk(chunk)
		if err != nil {
			return fmt.Errorf("server: speech chunk: %w", err)
		}
		if !started {
			start(rate)
			if wav {
				pcm = append(audio.StreamHeader(rate), pcm...)
			}
		}
		if sse {
			err = event(map[string]string{"type": "speech.audio.delta", "audio": base64.StdEncoding.EncodeToString(pcm)})
		} else {
			_, err = w.Write(pcm)
		}
		if err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil {
		lease.Release(true)
		if !started {
			return fromRuntime(err)
		}
		if runtime.CodeOf(err) != core.CodeCancelled {
			logger(r.Context()).Error("speech stream failed", "err", err)
			if !sse {
				panic(http.ErrAbortHandler) // no in-band error in raw audio
			}
			writeErrorEvent(w, rc, buf, fromRuntime(err))
		}
		return nil
	}
	var werr error
	if !started { // the engine emitted nothing
		lease.Release(true)
		return &Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "the engine produced no audio",
			Err: fmt.Errorf("model %q streamed no chunk", p.Model)}
	}
	if sse {
		werr = event(map[string]any{"type": "speech.audio.done", "usage": map[string]int{"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}})
	}
	if werr == nil {
		werr = rc.Flush()
	}
	lease.Release(werr != nil)
	return nil
}
