package server

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/core/runtime"
)

func decodeString(s string, v any) error { return decodeBytesStrict(strings.NewReader(s), v) }

func TestDecodeStrict(t *testing.T) {
	var spec ModelSpec
	for _, bad := range []string{``, `{`, `{"engine":"x"} {}`, `{"engine":"x"}x`, `{"engine":"x","bogus":1}`, `[]`} {
		if err := decodeString(bad, &spec); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
	if err := decodeString("{\"engine\":\"x\"}\n \t", &spec); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("POST", "/", bytes.NewReader([]byte(`{"engine":"`+strings.Repeat("x", 100)+`"}`)))
	r.Header.Set("Content-Type", "application/json")
	r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, 10)
	var e *Error
	if err := decodeStrict(r, &spec); !errors.As(err, &e) || e.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("body limit: %v", err)
	}
}

func TestParseSpec(t *testing.T) {
	cases := []struct {
		body     string
		parallel bool
		ok       bool
		slots    int
	}{
		{`{"engine":"fixture"}`, false, true, 1},
		{`{"engine":"fixture","slots":1}`, false, false, 0}, // legacy: any slots field is 400
		{`{"engine":"fixture","slots":null}`, false, false, 0},
		{`{"engine":"fixture","slots":null}`, true, true, 1},
		{`{"engine":"fixture","slots":4}`, true, true, 4},
		{`{"engine":"fixture","slots":17}`, true, false, 0},
		{`{"engine":"fixture","slots":0}`, true, false, 0},
		{`{"engine":"fixture","slots":"2"}`, true, false, 0},
		{`{"engine":"fixture","slots":1.5}`, true, false, 0},
		{`{"slots":1}`, true, false, 0},
		{`{"engine":"f","admission_timeout_ms":-1}`, true, false, 0},
		{`{"engine":"f","max_queue":-1}`, true, false, 0},
		{`{"engine":"f","options":[1]}`, true, false, 0},
	}
	for _, c := range cases {
		var s ModelSpec
		err := decodeString(c.body, &s)
		var p parsedSpec
		if err == nil {
			p, err = parseSpec(&s, c.parallel)
		}
		if (err == nil) != c.ok || (c.ok && p.Slots != c.slots) {
			t.Fatalf("%s parallel=%v: %+v %v", c.body, c.parallel, p, err)
		}
	}
	var s ModelSpec
	_ = decodeString(`{"engine":"f","options":{"b":1,"a":{"z":2,"y":1}}}`, &s)
	p, _ := parseSpec(&s, true)
	if p.Options != `{"a":{"y":1,"z":2},"b":1}` {
		t.Fatal(p.Options)
	}
}

func TestModelID(t *testing.T) {
	for _, ok := range []string{"a", "tts-1.en_US", strings.Repeat("x", 128)} {
		if validModelID(ok) != nil {
			t.Fatal(ok)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a b", strings.Repeat("x", 129), "é"} {
		if validModelID(bad) == nil {
			t.Fatal(bad)
		}
	}
}

// FuzzModelSpec: decoding never panics, and an accepted spec is valid.
func FuzzModelSpec(f *testing.F) {
	for _, s := range []string{`{"engine":"fixture","slots":2,"options":{"load_ms":5}}`, `{"engine":"x","slots":null}`,
		`{"engine":"x","admission_timeout_ms":0,"max_queue":3}`, `{}`, `{"slots":1e400}`, `{"options":{"a":[1,{"b":null}]}}`} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, body string, parallel bool) {
		var s ModelSpec
		if decodeString(body, &s) != nil {
			return
		}
		p, err := parseSpec(&s, parallel)
		if err != nil {
			return
		}
		if p.Slots < 1 || p.Slots > 16 || p.Engine == "" || p.MaxQueue < 0 || p.AdmissionTimeout < 0 {
			t.Fatalf("accepted an invalid spec: %+v", p)
		}
		if !parallel && s.Slots != nil {
			t.Fatal("legacy mode accepted slots")
		}
		if again, err := runtime.CanonicalOptions([]byte(p.Options)); err != nil || again != p.Options {
			t.Fatalf("options not canonical: %q -> %q %v", p.Options, again, err)
		}
	})
}

// FuzzInferRequest: decoding never panics; accepted requests have input.
func FuzzInferRequest(f *testing.F) {
	for _, s := range []string{`{"input":{"text":"hi"}}`, `{"input":"x","stream":true,"admission_timeout_ms":5}`, `{"input":null}`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var req InferRequest
		if decodeString(body, &req) != nil {
			return
		}
		if parseInfer(&req) == nil && req.Input == nil {
			t.Fatal("accepted a request without input")
		}
	})
}
