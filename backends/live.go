package backends

import (
	"context"
	"encoding/json"
	"io"
)

// Live sessions (CONTRACT.md "Live sessions"). A live transcription is one
// ordinary request whose Infer call lasts the whole session: Request.Live
// hands the engine the session's audio as it arrives, and the engine
// emits a LiveEvent for every partial hypothesis and every finished turn.
// The lease is held for the call, so the session holds one slot from its
// first audio to its end.

// LiveAudio is the audio of a live session, read by the engine while it
// decodes. Next blocks until the next piece, the end of the session
// (io.EOF) or the end of ctx.
type LiveAudio interface {
	Next(ctx context.Context) (LivePiece, error)
}

// LiveReplay is a LiveAudio that replays Pieces in order, then io.EOF:
// a recorded session, for tests and tools. It ignores ctx.
type LiveReplay struct{ Pieces []LivePiece }

// Next implements LiveAudio.
func (r *LiveReplay) Next(context.Context) (LivePiece, error) {
	if len(r.Pieces) == 0 {
		return LivePiece{}, io.EOF
	}
	p := r.Pieces[0]
	r.Pieces = r.Pieces[1:]
	return p, nil
}

// LivePiece is one step of a live session's input, applied in this order:
// Clear drops the turn in progress and its audio, Samples are appended to
// the turn, Commit ends the turn (the engine emits its final). The end of
// input (io.EOF) drops a turn in progress unless the last piece committed
// it.
type LivePiece struct {
	Samples []int16 // PCM16 mono at Rate
	Rate    int     // Hz, > 0 whenever Samples is not empty
	Clear   bool
	Commit  bool
}

// LiveEvent is what a live engine emits (as JSON, through the request's
// Emit). A transcriber emits, for turn Turn (0, 1, ... in commit order),
// Kind "partial" with the current hypothesis of the turn in progress, or
// "final" with the turn's transcript once it was committed. A
// voice-activity engine emits "speech_started" and "speech_stopped" with
// AudioMS, the time in the session's audio (from its first sample) where
// speech starts (less the padding) or ends (plus the padding).
type LiveEvent struct {
	Kind    string `json:"kind"`
	Turn    int    `json:"turn,omitempty"`
	Text    string `json:"text,omitempty"`
	AudioMS int64  `json:"audio_ms,omitempty"`
}

// LiveKinds of LiveEvent.
const (
	LivePartial       = "partial"
	LiveFinal         = "final"
	LiveSpeechStarted = "speech_started"
	LiveSpeechStopped = "speech_stopped"
)

// LiveEngine is implemented by engines whose sessions take Request.Live:
// the server opens live sessions only on their models.
type LiveEngine interface {
	Live() bool
}

// EmitLive marshals ev and emits it.
func EmitLive(emit Emit, ev LiveEvent) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return emit(b)
}
