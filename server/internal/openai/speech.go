package openai

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/edge"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/sse"
)

// Speech serves POST /v1/audio/speech: JSON {model, input, voice,
// instructions (empty only), response_format wav|mp3|opus|aac|flac|pcm, speed,
// stream_format, sample_rate}; a field it cannot honour is 400 naming it
// (SpeechParams.Request, before a lease; the engine checks the voice,
// naming the model's); the answer is the audio (wav and pcm: pcmSpeech)
// with the engine's content type (audio/wav, audio/mpeg, audio/ogg; codecs=opus, audio/aac, audio/flac, or
// audio/pcm; rate=24000 unless sample_rate) or, with stream_format,
// streamed (streamSpeech).
func (h *Handlers) Speech(w http.ResponseWriter, r *http.Request) error {
	var p SpeechParams
	if err := edge.Decode(r, &p); err != nil {
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
	req.ID = httpapi.RequestID(r.Context())
	if req.Stream {
		return h.streamSpeech(w, r, lease, req, p)
	}
	switch f := p.ResponseFormat; f {
	case "", "wav", "pcm":
		return h.pcmSpeech(w, r, lease, req, p.Model, f != "pcm")
	case "mp3", "opus", "flac":
		return h.codecSpeech(w, r, lease, req, p.Model, f)
	}
	// aac is encoded whole by the engine (FFmpeg's encoder here takes
	// the whole input).
	out, err := lease.Infer(r.Context(), req, nil)
	if err != nil {
		return httpapi.FromRuntimeModel(err)
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
			return httpapi.FromRuntimeModel(err)
		}
		if runtime.CodeOf(err) != core.CodeCancelled {
			httpapi.Logger(r.Context()).Error("speech stream failed", "err", err)
			if sw == nil {
				panic(http.ErrAbortHandler) // no in-band error in raw audio
			}
			h.d.WriteErrorEvent(w, rc, nil, httpapi.FromRuntimeModel(err))
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

// speechBuffer is how much of a wav or pcm answer pcmSpeech holds before
// it starts sending: an answer that ends within it goes out whole, with
// its Content-Length and a WAV header stating its sizes (byte-identical
// to the engine's whole-file answer); a longer one is sent as it is
// synthesised, so a request holds at most this plus one chunk
// (audio.MaxChunkSamples) whatever the text's length. 1 MiB is about 11 s
// of 48 kHz audio, 33 s at 16 kHz.
const speechBuffer = 1 << 20

// pcmSpeech answers a wav or pcm speech request from the engine's chunks
// (audio.ChunkEmitter: the same samples as the whole file). Within
// speechBuffer the answer is the whole file (Deps.WriteTask); past it the
// headers go out (wav: a header whose sizes say "unknown", as
// stream_format audio's) and every chunk is written and flushed as it
// arrives, all but the last byte, which is written after the lease is
// released (the lease is held until all but the last byte are flushed, as
// WriteTask holds it). A client that leaves stops the synthesis (its
// context ends, and a failed write ends the engine's emit); an engine
// failure after the first bytes aborts the body (never a clean end). An
// engine that does not stream answers whole, as before.
func (h *Handlers) pcmSpeech(w http.ResponseWriter, r *http.Request, lease *runtime.Lease, req backends.Request, model string, wav bool) error {
	req.Stream = true
	b := &pcmBody{w: w, rc: http.NewResponseController(w), wav: wav}
	out, err := lease.Infer(r.Context(), req, b.chunk)
	if err != nil {
		if !b.sent {
			return httpapi.FromRuntimeModel(err)
		}
		lease.Release(true)
		switch {
		case b.werr != nil: // the client left or stopped reading
			httpapi.Logger(r.Context()).Debug("speech not delivered", "err", b.werr)
		case runtime.CodeOf(err) != core.CodeCancelled:
			httpapi.Logger(r.Context()).Error("speech failed after its first bytes", "err", err)
			panic(http.ErrAbortHandler) // no in-band error in raw audio
		}
		return nil
	}
	if b.sent {
		ferr := b.rc.Flush()
		lease.Release(ferr != nil)
		if ferr == nil {
			_, _ = w.Write(b.last)
		}
		return nil
	}
	body, ct := out.Data, out.ContentType
	if len(body) == 0 && b.rate != 0 {
		body, ct = b.buf, audio.PCMContentType(b.rate)
		if wav {
			copy(body, audio.WAVHeader(b.rate, len(body)-wavHeaderLen))
			ct = "audio/wav"
		}
	}
	if len(body) == 0 {
		return &httpapi.Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "the engine produced no audio",
			Err: fmt.Errorf("model %q is not a speech model", model)}
	}
	return h.d.WriteTask(w, r, lease, ct, body)
}

// wavHeaderLen is the size of the WAV header audio.WAVHeader writes.
const wavHeaderLen = 44

// pcmBody is a wav or pcm answer as the engine's chunks arrive: held in
// buf up to speechBuffer, then sent.
type pcmBody struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	wav  bool
	rate int    // of the chunks, 0 before the first
	buf  []byte // the answer so far (wav: after room for its header) until sent
	sent bool   // the headers are written: the rest streams
	last []byte // the byte held back until the lease is released (sent)
	werr error  // the write that failed (the client left), ending the engine's emit
}

// chunk is the engine's emit: it takes one audio.Chunk.
func (b *pcmBody) chunk(c json.RawMessage) error {
	pcm, rate, err := audio.DecodeChunk(c)
	if err != nil {
		return fmt.Errorf("openai: speech chunk: %w", err)
	}
	switch {
	case b.rate == 0:
		b.rate = rate
		if b.wav {
			b.buf = make([]byte, wavHeaderLen, wavHeaderLen+len(pcm))
		}
	case rate != b.rate:
		return fmt.Errorf("openai: speech chunk at %d Hz after chunks at %d Hz", rate, b.rate)
	}
	if b.sent {
		return b.write(pcm)
	}
	b.buf = append(b.buf, pcm...)
	if len(b.buf) <= speechBuffer {
		return nil
	}
	ct := audio.PCMContentType(b.rate)
	if b.wav {
		copy(b.buf, audio.StreamHeader(b.rate))
		ct = "audio/wav"
	}
	hd := b.w.Header()
	hd.Set("Content-Type", ct)
	hd.Set("X-Accel-Buffering", "no")
	b.w.WriteHeader(http.StatusOK)
	b.sent = true
	buf := b.buf
	b.buf = nil
	return b.write(buf)
}

// write sends the byte held back and all of p but its last byte, which
// it holds back in turn, and flushes.
func (b *pcmBody) write(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	if _, b.werr = b.w.Write(b.last); b.werr != nil {
		return b.werr
	}
	if _, b.werr = b.w.Write(p[:len(p)-1]); b.werr != nil {
		return b.werr
	}
	b.last = append(b.last[:0], p[len(p)-1])
	if b.werr = b.rc.Flush(); errors.Is(b.werr, http.ErrNotSupported) {
		b.werr = nil // a writer that cannot flush still takes the bytes
	}
	return b.werr
}

// codecSpeech answers an mp3, opus or flac speech request from the
// engine's chunks, each encoded as it arrives (audio.CodecWriter: the
// bytes of the whole-file encoding), so the request holds the encoded
// file and one chunk, never the PCM; the file goes out whole (its
// header is completed at the end) through Deps.WriteTask. An engine that
// does not stream answers whole, as before.
func (h *Handlers) codecSpeech(w http.ResponseWriter, r *http.Request, lease *runtime.Lease, req backends.Request, model, format string) error {
	req.Stream = true
	var cw *audio.CodecWriter
	rate := 0
	defer func() {
		if cw != nil {
			cw.Abort() // a no-op once closed
		}
	}()
	out, err := lease.Infer(r.Context(), req, func(c json.RawMessage) error {
		pcm, cr, err := audio.DecodeChunk(c)
		if err != nil {
			return fmt.Errorf("openai: speech chunk: %w", err)
		}
		if cw == nil {
			if cw, err = audio.NewCodecWriter(r.Context(), format, cr); err != nil {
				return err
			}
			rate = cr
		} else if cr != rate {
			return fmt.Errorf("openai: speech chunk at %d Hz after chunks at %d Hz", cr, rate)
		}
		samples, err := audio.PCM16(pcm)
		if err != nil {
			return err
		}
		return cw.Write(samples)
	})
	if err != nil {
		return httpapi.FromRuntimeModel(err)
	}
	body, ct := out.Data, out.ContentType
	if cw != nil && len(body) == 0 {
		if body, ct, err = cw.Close(); err != nil {
			return httpapi.FromRuntimeModel(err)
		}
	}
	if len(body) == 0 {
		return &httpapi.Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "the engine produced no audio",
			Err: fmt.Errorf("model %q is not a speech model", model)}
	}
	return h.d.WriteTask(w, r, lease, ct, body)
}
