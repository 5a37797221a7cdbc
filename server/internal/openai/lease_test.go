package openai

import (
	"bytes"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// fakeRuntime serves one whisper model (so translations are served) and
// fails the test on any per-model read: a task route's task is the
// lease's to decide, never a status read of its own.
type fakeRuntime struct{ t *testing.T }

func (f fakeRuntime) Status() []core.ModelStatus {
	return []core.ModelStatus{{ID: "w", Engine: "whisper", Task: "asr"}}
}

func (f fakeRuntime) StatusOf(id string) (core.ModelStatus, error) {
	f.t.Errorf("StatusOf(%q): a task route read the model's status", id)
	return core.ModelStatus{}, errors.New("unexpected")
}

func (f fakeRuntime) ConfigOf(id string) (core.Config, core.ModelStatus, error) {
	f.t.Errorf("ConfigOf(%q): a task route read the model's config", id)
	return core.Config{}, core.ModelStatus{}, errors.New("unexpected")
}

func (f fakeRuntime) Resolve(name string) (string, bool) {
	f.t.Errorf("Resolve(%q): a task route resolved the model's name (its lease does)", name)
	return "", false
}

type memPayload struct{ b []byte }

func (p memPayload) Bytes() []byte       { return p.b }
func (p memPayload) Blob() backends.Blob { return bytes.NewReader(p.b) }
func (p memPayload) Close() error        { return nil }

// leaseCall is one call of Deps.Lease.
type leaseCall struct{ model, task string }

// testHandlers returns handlers whose Lease records its calls and refuses
// each with refusal, as the runtime's AcquireTask refuses a model of
// another task.
func testHandlers(t *testing.T, refusal error) (*Handlers, *[]leaseCall) {
	var calls []leaseCall
	h := New(Deps{
		Runtime:      fakeRuntime{t},
		ValidModelID: func(string) error { return nil },
		Lease: func(r *http.Request, id, task string) (*runtime.Lease, error) {
			calls = append(calls, leaseCall{id, task})
			return nil, refusal
		},
		Spool: func(r *http.Request, body io.Reader) (Payload, error) {
			b, err := io.ReadAll(body)
			return memPayload{b}, err
		},
		BodyError:    func(what string, err error) error { return httpapi.Invalid("%s: %v", what, err) },
		BodyDone:     func(*http.Request, error) {},
		MaxFormField: 4 << 10,
	})
	return h, &calls
}

// multipartBody is an upload of a file with fields.
func multipartBody(t *testing.T, fields map[string]string) (string, io.Reader) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fw, err := mw.CreateFormFile("file", "a.wav")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write([]byte("RIFF not really a wav"))
	for k, v := range fields {
		if err := mw.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return mw.FormDataContentType(), &b
}

// Every task route takes its lease through Deps.Lease with its task and
// answers the lease's refusal as it is: the task check and the lease are
// one runtime decision (runtime.AcquireTask; CONTRACT.md err.wrong-task),
// so a reconfigure that changes the task while the request queues can
// never hand it a lease of the other task. A field the route cannot use
// is refused before any lease.
func TestTaskRoutesLeaseThroughOneDecision(t *testing.T) {
	refusal := &httpapi.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "wrong_task", Param: "model"}
	routes := []struct {
		name, task string
		serve      func(h *Handlers, w http.ResponseWriter, r *http.Request) error
		json       string            // the JSON body, else an upload
		fields     map[string]string // the upload's fields
		bad        map[string]string // an upload's unusable field
	}{
		{name: "speech", task: "tts", serve: (*Handlers).Speech, json: `{"model":"m","input":"hi"}`},
		{name: "transcriptions", task: "asr", serve: (*Handlers).Transcription, fields: map[string]string{"model": "m"}, bad: map[string]string{"model": "m", "stream": "maybe"}},
		{name: "translations", task: "asr", serve: (*Handlers).Translation, fields: map[string]string{"model": "m"}, bad: map[string]string{"model": "m", "language": "en"}},
		{name: "voice-activity", task: "vad", serve: (*Handlers).VoiceActivity, fields: map[string]string{"model": "m"}, bad: map[string]string{"model": "m", "threshold": "2"}},
		{name: "diarization", task: "diarization", serve: (*Handlers).Diarization, fields: map[string]string{"model": "m"}, bad: map[string]string{"model": "m", "num_speakers": "0"}},
		{name: "embedding", task: "diarization", serve: (*Handlers).SpeakerEmbedding, fields: map[string]string{"model": "m"}, bad: map[string]string{"model": "m", "prompt": "x"}},
	}
	for _, rt := range routes {
		h, calls := testHandlers(t, refusal)
		var r *http.Request
		if rt.json != "" {
			r = httptest.NewRequest("POST", "/", strings.NewReader(rt.json))
			r.Header.Set("Content-Type", "application/json")
		} else {
			ct, body := multipartBody(t, rt.fields)
			r = httptest.NewRequest("POST", "/", body)
			r.Header.Set("Content-Type", ct)
		}
		err := rt.serve(h, httptest.NewRecorder(), r)
		if err != error(refusal) {
			t.Errorf("%s: %v, want the lease's refusal as is", rt.name, err)
		}
		if want := []leaseCall{{"m", rt.task}}; len(*calls) != 1 || (*calls)[0] != want[0] {
			t.Errorf("%s: lease calls %v, want %v", rt.name, *calls, want)
		}
		if rt.bad == nil {
			continue
		}
		h, calls = testHandlers(t, refusal)
		ct, body := multipartBody(t, rt.bad)
		r = httptest.NewRequest("POST", "/", body)
		r.Header.Set("Content-Type", ct)
		var e *httpapi.Error
		if err := rt.serve(h, httptest.NewRecorder(), r); !errors.As(err, &e) || e.Status != http.StatusBadRequest || err == error(refusal) {
			t.Errorf("%s %v: %v, want a 400 of its own", rt.name, rt.bad, err)
		}
		if len(*calls) != 0 {
			t.Errorf("%s %v: a lease was asked for a request refused for its fields: %v", rt.name, rt.bad, *calls)
		}
	}
}
