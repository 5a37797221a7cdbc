package server

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/flite"
	"github.com/sluice-dev/sluice/server/internal/openai"
)

// rawError decodes an error answer keeping null apart from "".
func rawError(t *testing.T, r resp) map[string]any {
	t.Helper()
	var e struct {
		Error map[string]any `json:"error"`
	}
	r.json(t, &e)
	if e.Error == nil {
		t.Fatalf("not an error answer: %s", r.body)
	}
	return e.Error
}

// Errors have OpenAI's shape: param and code are JSON null where there is
// none (they were "" and param was missing), and the offending field where
// known (CONTRACT.md err.shape).
func TestErrorBodyHasOpenAIShape(t *testing.T) {
	ts := newServer(t, nil)
	e := rawError(t, ts.must(404, "GET", "/no/such/route", ""))
	if len(e) != 4 || e["code"] != nil || e["param"] != nil || e["type"] != "not_found_error" {
		t.Fatalf("%v", e)
	}
	for _, k := range []string{"code", "param"} {
		if v, ok := e[k]; !ok || v != nil {
			t.Fatalf("%s: %v", k, e)
		}
	}
	e = rawError(t, ts.must(400, "GET", "/v1/audio/voices?bogus=1", ""))
	if e["param"] != "bogus" || e["code"] != "unknown_parameter" {
		t.Fatalf("%v", e)
	}
	long := strings.Repeat("k", 10000)
	e = rawError(t, ts.must(400, "GET", "/v1/audio/voices?"+long+"=1", ""))
	if p := e["param"].(string); len(p) > 100 || len(e["message"].(string)) > 300 {
		t.Fatalf("an unknown parameter's name is echoed unbounded: %d bytes", len(p))
	}
}

// A missing or wrong key is OpenAI's 401: invalid_request_error with code
// invalid_api_key (it was permission_error), which the SDKs raise as
// AuthenticationError; a 403 stays permission_error (CONTRACT.md err.auth).
func TestWrongKeyIsInvalidAPIKey(t *testing.T) {
	ts := newServer(t, func(c *Config) { c.APIKey, c.ManagementKey = "k", "m" })
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}} {
		e := rawError(t, ts.must(401, "GET", "/v1/models", "", hdr...))
		if e["type"] != "invalid_request_error" || e["code"] != "invalid_api_key" {
			t.Fatalf("%v", e)
		}
	}
	ts = newServer(t, func(c *Config) { c.UIManagement = false })
	if e := rawError(t, ts.must(403, "PUT", "/v1/models/a", `{"engine":"fixture"}`)); e["type"] != "permission_error" {
		t.Fatalf("%v", e)
	}
}

// fliteServer is a server with flite beside the fixture.
func fliteServer(t *testing.T) *tserver {
	t.Helper()
	if err := flite.Available(); err != nil {
		t.Fatalf("flite not installed here: %v (make deps installs it)", err)
	}
	s, err := New(testConfig(t), Options{Engines: backends.Registry{flite.Name: flite.New()},
		Logger: slog.New(slog.DiscardHandler), CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := &tserver{t: t, s: s, logs: &logBuffer{}, client: &http.Client{Transport: &http.Transport{}}}
	t.Cleanup(ts.close)
	return ts
}

// An engine's refusal is said once: `model "a": flite: ...`, not
// `model "a": invalid request: invalid: flite: ...` (the runtime and
// backends.Invalidf each prefixed it), at registration and per request.
func TestInvalidMessageSaysItOnce(t *testing.T) {
	ts := fliteServer(t)
	e := rawError(t, ts.must(400, "PUT", "/v1/models/a", `{"engine":"flite","task":"tts","checkpoint":"slt","options":{"voice":"klingon"}}`))
	if msg := e["message"].(string); !strings.HasPrefix(msg, `model "a": engine flite refused the spec: flite: unknown voice "klingon"`) {
		t.Fatalf("%q", msg)
	}
	ts.put("a", `{"engine":"flite","task":"tts","checkpoint":"slt","slots":1}`)
	e = rawError(t, ts.must(400, "POST", "/v1/audio/speech", `{"model":"a","input":"hi","voice":"nope"}`))
	if msg := e["message"].(string); !strings.HasPrefix(msg, `model "a": flite: voice "nope" not in checkpoint`) || e["type"] != "invalid_request_error" || e["param"] != "voice" {
		t.Fatalf("%q", msg)
	}
}

// Model objects carry OpenAI's created (the second this process registered
// the model; a reconfigure keeps it) and owned_by.
func TestModelsCreatedAndOwnedBy(t *testing.T) {
	ts := newServer(t, nil)
	before := time.Now().Unix()
	m := ts.put("a", `{"engine":"fixture","slots":1}`)
	after := time.Now().Unix()
	if m.Created < before || m.Created > after || m.OwnedBy != "sluice" {
		t.Fatalf("%+v", m)
	}
	if again := ts.put("a", `{"engine":"fixture","slots":2}`); again.Created != m.Created {
		t.Fatalf("reconfigure changed created: %d -> %d", m.Created, again.Created)
	}
	var list struct {
		Data []map[string]any `json:"data"`
	}
	ts.must(200, "GET", "/v1/models", "").json(t, &list)
	if len(list.Data) != 1 || list.Data[0]["created"] != float64(m.Created) || list.Data[0]["owned_by"] != "sluice" {
		t.Fatalf("%v", list.Data)
	}
	if got := ts.model("a"); got.Created != m.Created || got.OwnedBy != "sluice" {
		t.Fatalf("%+v", got)
	}
}

// GET /v1/audio/voices lists each speech model's voices from its engine (a
// fixture speech model, whose engine lists none, shows "default"); other
// tasks are not listed; ?model= picks one, and must name a speech model.
func TestVoices(t *testing.T) {
	ts := fliteServer(t)
	ts.put("kal", `{"engine":"flite","task":"tts","checkpoint":"kal","slots":1}`)
	ts.put("fx", `{"engine":"fixture","task":"tts","slots":1}`)
	ts.put("asr", `{"engine":"fixture","task":"asr","slots":1}`)
	var got openai.VoiceList
	ts.must(200, "GET", "/v1/audio/voices", "").json(t, &got)
	stock := func(v string) string { // without a voice_map every stock name is the default voice (names.voice-map)
		var b strings.Builder
		for i, s := range []string{"alloy", "ash", "ballad", "cedar", "coral", "echo", "fable", "marin", "nova", "onyx", "sage", "shimmer", "verse"} {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q:%q", s, v)
		}
		return `"voice_map":{` + b.String() + `}`
	}
	want := `{"object":"list","data":[` +
		`{"model":"kal","engine":"flite","voices":[{"id":"kal","languages":["en-us"],"sample_rate":8000,"default":true}],"truncated":false,` + stock("kal") + `},` +
		`{"model":"fx","engine":"fixture","voices":[{"id":"default","languages":[],"default":true}],"truncated":false,` + stock("default") + `}],"truncated":false}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Fatalf("%s\nwant %s", b, want)
	}
	ts.must(200, "GET", "/v1/audio/voices?model=fx", "").json(t, &got)
	if len(got.Data) != 1 || got.Data[0].Model != "fx" {
		t.Fatalf("%+v", got)
	}
	if e := rawError(t, ts.must(400, "GET", "/v1/audio/voices?model=asr", "")); e["code"] != "wrong_task" || e["param"] != "model" {
		t.Fatalf("%v", e)
	}
	ts.must(404, "GET", "/v1/audio/voices?model=ghost", "")
	ts.must(400, "GET", "/v1/audio/voices?model=a&model=b", "")
}

// untouchable is a body that fails the test if anything reads it.
type untouchable struct{ t *testing.T }

func (u untouchable) Read([]byte) (int, error) {
	u.t.Error("the body was read")
	return 0, io.EOF
}

// POST /v1/audio/translations (it was 404) is a clear 400 unsupported_task
// decided from the headers: a large declared upload is not read to say so;
// a body that is no upload at all is 415.
func TestTranslationsSayNoModelTranslates(t *testing.T) {
	ts := newServer(t, nil)
	for _, ct := range []string{"multipart/form-data; boundary=x", "audio/mpeg"} {
		req := httptest.NewRequest("POST", "/v1/audio/translations", untouchable{t})
		req.Host, req.ContentLength = "127.0.0.1", 8<<20
		req.Header.Set("Content-Type", ct)
		rec := httptest.NewRecorder()
		ts.s.Handler().ServeHTTP(rec, req)
		e := rawError(t, resp{status: rec.Code, body: rec.Body.Bytes()})
		if rec.Code != 400 || e["type"] != "invalid_request_error" || e["code"] != "unsupported_task" ||
			!strings.Contains(e["message"].(string), "translates") {
			t.Fatalf("%s: %d %v", ct, rec.Code, e)
		}
	}
	for _, ct := range []string{"text/plain", "multipart/form-data", ""} {
		if e := rawError(t, ts.must(415, "POST", "/v1/audio/translations", "x", "Content-Type", ct)); e["code"] != "unsupported_media_type" {
			t.Fatalf("%q: %v", ct, e)
		}
	}
}
