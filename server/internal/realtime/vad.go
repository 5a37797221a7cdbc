package realtime

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Server-side turn detection (CONTRACT.md live.turn-detection): with
// turn_detection {"type":"server_vad"} the session takes a second lease,
// on a VAD model (turn_detection.model, a Sluice field, else
// --realtime-vad-model), and runs that engine live beside the transcriber
// on the same audio. Its speech_started and speech_stopped become the
// input_audio_buffer events of the same names, and a speech_stopped
// commits the turn in progress, as a client's commit would (the turn ends
// where the server's reading of the audio stands when the VAD reports the
// stop: at least silence_duration_ms after the speech, at most the VAD's
// backlog later).

// OpenAI's server_vad defaults.
const (
	vadThreshold = 0.5
	vadPaddingMS = 300
	vadSilenceMS = 500
)

// vadSide is a session's turn detection: its lease, queue and engine call.
type vadSide struct {
	model string
	lease *runtime.Lease
	q     *liveQueue
	done  chan struct{}
	err   error
}

// startVAD checks td, takes the VAD model's lease (with its admission
// timeout, like any request) and starts its engine; it returns an error
// event's parameter and message on failure.
func (ls *liveSession) startVAD(td turnDetection) (param, msg string) {
	if td.Type != "server_vad" {
		return "turn_detection.type", fmt.Sprintf("turn_detection type %q is not supported; use server_vad or null", td.Type)
	}
	in := map[string]any{"threshold": vadThreshold, "speech_pad_ms": vadPaddingMS, "min_silence_ms": vadSilenceMS}
	if v := td.Threshold; v != nil {
		if *v <= 0 || *v >= 1 {
			return "turn_detection.threshold", fmt.Sprintf("threshold %v outside (0, 1)", *v)
		}
		in["threshold"] = *v
	}
	if v := td.PrefixPaddingMS; v != nil {
		if *v < 1 || *v > 10000 {
			return "turn_detection.prefix_padding_ms", fmt.Sprintf("prefix_padding_ms %d outside 1..10000", *v)
		}
		in["speech_pad_ms"] = *v
	}
	if v := td.SilenceDurationMS; v != nil {
		if *v < 1 || *v > 60000 {
			return "turn_detection.silence_duration_ms", fmt.Sprintf("silence_duration_ms %d outside 1..60000", *v)
		}
		in["min_silence_ms"] = *v
	}
	model := td.Model
	if model == "" {
		model = ls.h.d.Config.VADModel
	}
	if model == "" {
		return "turn_detection.model", "no VAD model: name one in turn_detection.model (a Sluice field) or start the server with --realtime-vad-model"
	}
	// A first look, before the lease queues (or loads the model); the
	// lease's own snapshot decides: AcquireTask checks the task on it, and
	// its engine must take live audio, so a concurrent reconfigure of V
	// never leaves the session a lease on a model that is not a live VAD
	// (live.turn-detection).
	st, err := ls.h.d.Runtime.StatusOf(model)
	if err != nil {
		return "turn_detection.model", httpapi.FromRuntimeModel(err).Message
	}
	if st.Task != "vad" || !ls.h.takesLive(st.Engine) {
		return "turn_detection.model", notLiveVAD(model, st.Engine, st.Task)
	}
	lease, err := ls.h.d.Runtime.AcquireTask(ls.ctx, model, "vad", nil)
	if err != nil {
		return "turn_detection.model", httpapi.FromRuntimeModel(err).Message
	}
	// The VAD model's slots are shared the same way (live.slot-share):
	// server_vad sessions hold at most all but one of them.
	ss := ls.h.d.Sessions
	if vst, err := ls.h.d.Runtime.StatusOf(lease.Model()); err == nil && !ss.hold(lease, ShareOf(vst.Slots)) {
		lease.Release(false)
		return "turn_detection.model", fmt.Sprintf("VAD model %q: live sessions hold %d of its %d slots already, the most they may (one stays for requests)",
			lease.Model(), ShareOf(vst.Slots), vst.Slots)
	}
	if !ls.h.takesLive(lease.Engine()) {
		ss.release(lease, false)
		return "turn_detection.model", notLiveVAD(model, lease.Engine(), "vad")
	}
	input, _ := json.Marshal(in)
	v := &vadSide{model: model, lease: lease, q: newLiveQueue(ls.q.max), done: make(chan struct{})}
	ls.mu.Lock()
	ls.vad = v
	ls.mu.Unlock()
	go func() {
		defer close(v.done)
		_, v.err = lease.Infer(ls.ctx, backends.Request{ID: ls.reqID, Input: input, Live: v.q}, ls.onVAD)
		if v.err != nil && ls.ctx.Err() == nil {
			ls.log.Error("realtime turn detection failed", "model", model, "err", v.err)
			_ = ls.send(map[string]any{"type": "error", "error": rtError{Type: "server_error", Code: "vad_failed", Message: httpapi.FromRuntimeModel(v.err).Message}})
			ls.finish(closeInternal, "turn detection failed", false)
		}
	}()
	go ls.watchModel(model)
	return "", ""
}

// notLiveVAD is the error event's message for a turn-detection model
// that is not a VAD model taking live audio.
func notLiveVAD(model, engine, task string) string {
	return fmt.Sprintf("model %q (engine %q, task %q) is not a VAD model that takes live audio", model, engine, task)
}

// watchModel asks the watcher to drain when a manager waits on model (the
// VAD model: its lease is held for the session too).
func (ls *liveSession) watchModel(model string) {
	ch, stop := ls.h.d.Runtime.WatchManagers(model)
	defer stop()
	if st, err := ls.h.d.Runtime.StatusOf(model); err == nil && st.QueuedManagers > 0 {
		signal(ls.drainReq)
		return
	}
	select {
	case <-ch:
		signal(ls.drainReq)
	case <-ls.ended:
	case <-ls.ctx.Done():
	}
}

// onVAD turns the VAD engine's events into server events; a stop commits
// the turn.
func (ls *liveSession) onVAD(chunk json.RawMessage) error {
	var ev backends.LiveEvent
	if err := json.Unmarshal(chunk, &ev); err != nil {
		return fmt.Errorf("realtime: live VAD event: %w", err)
	}
	ls.mu.Lock()
	item := ls.openItem
	ls.mu.Unlock()
	switch ev.Kind {
	case backends.LiveSpeechStarted:
		return ls.send(map[string]any{"type": "input_audio_buffer.speech_started", "audio_start_ms": ev.AudioMS, "item_id": item})
	case backends.LiveSpeechStopped:
		if err := ls.send(map[string]any{"type": "input_audio_buffer.speech_stopped", "audio_end_ms": ev.AudioMS, "item_id": item}); err != nil {
			return err
		}
		ls.commit("", false, true)
		return nil
	}
	return fmt.Errorf("realtime: live VAD event of kind %q", ev.Kind)
}

// stopVAD ends the turn detection's input, waits for its engine call and
// releases its lease.
func (ls *liveSession) stopVAD() {
	ls.mu.Lock()
	v := ls.vad
	ls.mu.Unlock()
	if v == nil {
		return
	}
	v.q.close()
	<-v.done
	failed := v.err != nil && !errors.Is(v.err, errQueueClosed) && runtime.CodeOf(v.err) != core.CodeOK
	ls.h.d.Sessions.release(v.lease, failed)
}
