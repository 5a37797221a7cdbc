// Package backends defines the engine interface that core/runtime drives, and
// holds the engines: backends/fixture (a controllable engine for tests, the
// simulator and the conformance suite) and the real engines loaded with
// purego.
//
// Threading rule: an Engine is shared by every model that uses it and must be
// safe for concurrent use. A Session is used by one goroutine at a time: the
// runtime gives each slot its own session and never runs two calls on one
// session at once. Every call honours its context where the engine allows it.
package backends

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Spec is what a pool is built from: a model's engine, checkpoint, task and
// options, and the slot count it will run with.
type Spec struct {
	Model      string          // the model ID, for messages and fixture output
	Version    uint64          // the committed config version, 0 for a probe
	Task       string          // e.g. "tts", "asr", "vad"
	Engine     string          // the engine's Name
	Checkpoint string          // path of the checkpoint (under the models root) or an engine-specific name
	Options    json.RawMessage // engine options, canonical JSON ("{}" when none)
	Slots      int
}

// Request is one inference call.
type Request struct {
	ID    string          // request ID, for logs and fixture output
	Slot  int             // the slot (session index) serving it
	Input json.RawMessage // the JSON input of /v1/models/{id}/infer, or engine-specific parameters
	Data  []byte          // binary payload (for example PCM16 audio), may be nil
	// Body, when set, is the binary payload as a random-access blob (an
	// upload the server spooled to a temporary file); engines read it
	// instead of Data, in bounded chunks (backends/audio). It is valid
	// until Infer returns.
	Body   Blob
	Stream bool // the caller consumes chunks through the emit callback
	// Live, when set, makes the call a live session (backends/live.go):
	// the engine reads audio from it until io.EOF and emits LiveEvents.
	Live LiveAudio

	// Version is the committed config version the request is bound to. It
	// can be newer than the Spec.Version the session was built with when a
	// reconfigure changed only admission metadata and kept the pool.
	Version uint64
}

// Blob is a request payload that is read in pieces instead of held in
// memory: an *os.File spooled by the server, or bytes.Reader-like memory.
type Blob interface {
	io.ReaderAt
	Size() int64
}

// Output is the result of one inference call.
type Output struct {
	JSON        json.RawMessage // JSON result, may be nil when Data is set
	Data        []byte          // binary result (for example WAV audio)
	ContentType string          // of Data
}

// Emit receives one chunk of a streamed result. An error (the client went
// away) makes Infer stop and return it.
type Emit func(chunk json.RawMessage) error

// Engine opens pools of sessions for model specs.
type Engine interface {
	// Name returns the engine's name as model specs write it.
	Name() string
	// Validate checks a spec completely before any live change: options,
	// files, slot count against what the engine can ever admit.
	Validate(spec Spec) error
	// Check is Validate that also returns the resident memory of a whole
	// pool of spec.Slots sessions, in megabytes, charged against the
	// memory budget: the spec's options and files are resolved once for
	// both, as a registration needs both (core/runtime calls it once per
	// registration or reconfigure; Validate is for callers that need no
	// estimate, such as a catalogue scan).
	Check(spec Spec) (int64, error)
	// Open opens the primary session and returns it with the parallel
	// capacity it advertises (1 for an engine without a parallel factory).
	Open(ctx context.Context, spec Spec) (Session, int, error)
	// Probe opens spec privately, reports its advertised capacity and closes
	// it again.
	Probe(ctx context.Context, spec Spec) (int, error)
}

// Session is one independent inference session (one slot).
type Session interface {
	// Clone creates session index (1..slots-1) from the primary. Only the
	// primary is cloned.
	Clone(ctx context.Context, index int) (Session, error)
	// Infer runs one request. For a stream, each chunk goes through emit
	// before Infer returns; the final Output may then be empty.
	Infer(ctx context.Context, req Request, emit Emit) (Output, error)
	// Close destroys the session and frees its memory. It must free the
	// session even when ctx has ended (Shutdown cancels it at its
	// deadline); ctx only bounds how long Close waits.
	Close(ctx context.Context) error
}

// Voice is one voice a speech model speaks (GET /v1/audio/voices).
type Voice struct {
	ID        string   `json:"id"`        // what a request's voice names
	Languages []string `json:"languages"` // BCP 47-like tags, lower or mixed case as the engine has them
	// SampleRate is the engine's output rate in Hz for this voice when the
	// request asks for none; 0 (absent) when the engine does not say.
	SampleRate int  `json:"sample_rate,omitempty"`
	Default    bool `json:"default,omitempty"` // the model's own voice, which "" and OpenAI's stock names mean
}

// VoiceLister is implemented by speech engines that can list the voices of
// a spec from its files alone (no library call, no session), so that a
// listing never loads a model.
type VoiceLister interface {
	Voices(spec Spec) ([]Voice, error)
}

// ErrInvalid marks a spec or request the engine refuses (HTTP 400).
var ErrInvalid = errors.New("invalid")

// Invalidf returns an error that matches ErrInvalid (errors.Is) and reads
// as the formatted message alone: the "invalid" is said once, by the HTTP
// answer's type, not again in its message. %w in format wraps as
// fmt.Errorf does.
func Invalidf(format string, args ...any) error {
	return &invalidError{err: fmt.Errorf(format, args...)}
}

// AsInvalid marks err as the engine refusing its input (errors.Is(x,
// ErrInvalid)) without changing its message; nil stays nil.
func AsInvalid(err error) error {
	if err == nil {
		return nil
	}
	return &invalidError{err: err}
}

// InvalidParam is Invalidf naming the request field at fault (param):
// the HTTP answer's param says it (ParamOf).
func InvalidParam(param, format string, args ...any) error {
	return &invalidError{err: fmt.Errorf(format, args...), param: param}
}

// WithParam names the request field at fault of an ErrInvalid that names
// none (its message unchanged); any other error is returned as it is.
func WithParam(param string, err error) error {
	if !errors.Is(err, ErrInvalid) || ParamOf(err) != "" {
		return err
	}
	return &invalidError{err: err, param: param}
}

// ParamOf returns the request field an ErrInvalid from InvalidParam names
// ("" when none does).
func ParamOf(err error) string {
	var ie *invalidError
	for errors.As(err, &ie) {
		if ie.param != "" {
			return ie.param
		}
		err = ie.err
	}
	return ""
}

// invalidError is Invalidf's, InvalidParam's and AsInvalid's error.
type invalidError struct {
	err   error
	param string // the request field at fault, or ""
}

func (e *invalidError) Error() string        { return e.err.Error() }
func (e *invalidError) Unwrap() error        { return e.err }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// Registry maps engine names to engines.
type Registry map[string]Engine

// Get returns the engine named name.
func (r Registry) Get(name string) (Engine, error) {
	e, ok := r[name]
	if !ok {
		return nil, Invalidf("unknown engine %q", name)
	}
	return e, nil
}
