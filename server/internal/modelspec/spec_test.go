package modelspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/edge"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/wire"
)

func decodeString(s string, v any) error { return httpapi.DecodeJSON([]byte(s), v) }

// toRuntime is what PUT /v1/models/{id} checks of a spec, without the
// runtime: the JSON conversion (Convert), then the runtime's validator,
// which Apply runs once.
func toRuntime(s *Spec, parallel bool) (runtime.ModelSpec, error) {
	out, err := s.Convert(parallel)
	if err == nil {
		err = out.Validate()
	}
	return out, err
}

func TestDecodeStrict(t *testing.T) {
	var spec Spec
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
	var e *httpapi.Error
	if err := edge.Decode(r, &spec); !errors.As(err, &e) || e.Status != http.StatusRequestEntityTooLarge {
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
		var s Spec
		err := decodeString(c.body, &s)
		var p runtime.ModelSpec
		if err == nil {
			p, err = toRuntime(&s, c.parallel)
		}
		if (err == nil) != c.ok || (c.ok && p.Slots != c.slots) {
			t.Fatalf("%s parallel=%v: %+v %v", c.body, c.parallel, p, err)
		}
	}
}

func TestModelID(t *testing.T) {
	for _, ok := range []string{"a", "tts-1.en_US", strings.Repeat("x", 128)} {
		if httpapi.ValidModelID(ok) != nil {
			t.Fatal(ok)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a b", strings.Repeat("x", 129), "é"} {
		if httpapi.ValidModelID(bad) == nil {
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
		var s Spec
		if decodeString(body, &s) != nil {
			return
		}
		p, err := toRuntime(&s, parallel)
		if err != nil {
			return
		}
		if p.Slots < 1 || p.Slots > 16 || p.Engine == "" || p.MaxQueue < 0 || p.AdmissionTimeout != nil && *p.AdmissionTimeout < 0 {
			t.Fatalf("accepted an invalid spec: %+v", p)
		}
		if !parallel && s.Slots != nil {
			t.Fatal("legacy mode accepted slots")
		}
		if _, err := runtime.CanonicalOptions(p.Options); err != nil {
			t.Fatalf("accepted options that are not one JSON object: %q %v", p.Options, err)
		}
	})
}

// FuzzInferRequest: decoding never panics; accepted requests have input.
func FuzzInferRequest(f *testing.F) {
	for _, s := range []string{`{"input":{"text":"hi"}}`, `{"input":"x","stream":true,"admission_timeout_ms":5}`, `{"input":null}`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var req wire.InferRequest
		if decodeString(body, &req) != nil {
			return
		}
		if wire.ParseInfer(&req) == nil && req.Input == nil {
			t.Fatal("accepted a request without input")
		}
	})
}

// Duplicate and case-folded keys (CONTRACT.md err.duplicate-keys):
// encoding/json keeps the last of two keys and matches keys
// case-insensitively, so both passed the strict decoder.
func TestDecodeStrictKeys(t *testing.T) {
	var spec Spec
	for _, c := range []struct{ body, key string }{
		{`{"engine":"fixture","engine":"espeak"}`, `"engine" is given twice`},
		{`{"Engine":"fixture"}`, `"Engine" must be spelled "engine"`},
		{`{"engine":"fixture","SLOTS":2}`, `"SLOTS" must be spelled "slots"`},
		{`{"engine":"fixture","options":{"load_ms":1,"load_ms":2}}`, `"options.load_ms" is given twice`},
		{`{"engine":"fixture","options":{"a":[{"b":1,"b":2}]}}`, `"options.a[0].b" is given twice`},
		{`{"engin\u0065":"fixture","engine":"x"}`, `"engine" is given twice`},
		{`{"engine":"fixture","options":{"s":"a\"b\\","s":1}}`, `"options.s" is given twice`},
		{`{"engine":"fixture","options":{` + manyKeys(40) + `,"k7":0}}`, `"options.k7" is given twice`},
	} {
		err := decodeString(c.body, &spec)
		var e *httpapi.Error
		if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, c.key) {
			t.Errorf("%s: %v, want 400 naming %s", c.body, err, c.key)
		}
	}
	var inf wire.InferRequest
	if err := decodeString(`{"input":{"text":"a","text":"b"}}`, &inf); err == nil || !strings.Contains(err.Error(), `"input.text" is given twice`) {
		t.Errorf("duplicate inside input: %v", err)
	}
	// Nested structs, slices and maps of structs are checked at every level.
	type inner struct {
		Name string `json:"name"`
	}
	type outer struct {
		In   inner            `json:"in"`
		List []inner          `json:"list"`
		ByID map[string]inner `json:"by_id"`
		Ptr  *inner           `json:"ptr"`
	}
	var o outer
	for _, c := range []struct{ body, key string }{
		{`{"in":{"NAME":"x"}}`, `"in.NAME" must be spelled "name"`},
		{`{"list":[{"name":"a"},{"Name":"b"}]}`, `"list[1].Name"`},
		{`{"by_id":{"k":{"nAme":"x"}}}`, `"by_id.k.nAme"`},
		{`{"ptr":{"Name":"x"}}`, `"ptr.Name"`},
		{`{"by_id":{"k":{},"k":{}}}`, `"by_id.k" is given twice`},
	} {
		if err := decodeString(c.body, &o); err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: %v, want naming %s", c.body, err, c.key)
		}
	}
	// The same keys spelled exactly, each once, still decode.
	if err := decodeString(`{"in":{"name":"x"},"list":[{"name":"a"}],"by_id":{"k":{"name":"y"},"K":{"name":"z"}},"ptr":{"name":"p"}}`, &o); err != nil || o.ByID["K"].Name != "z" {
		t.Fatalf("%v %+v", err, o)
	}
	if err := decodeString(`{"engine":"fixture","options":{"load_ms":1,"Load_ms":2}}`, &spec); err != nil {
		t.Fatalf("free-form options are only checked for duplicates: %v", err)
	}
}

// The startup config goes through the same strict decoding.
func TestParseModelsYAMLKeys(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"models:\n  - id: a\n    Engine: fixture\n", `"Engine" must be spelled "engine"`},
		{"models:\n  - id: a\n    engine: fixture\n    engine: espeak\n", `already defined`},
		{"models:\n  - id: a\n    engine: fixture\n    options: {load_ms: 1, load_ms: 2}\n", `already defined`},
	} {
		if _, err := ParseYAML([]byte(c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %s", c.yaml, err, c.want)
		}
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	return b.String()
}

// refDuplicate is a reference for the key walker's duplicate check, on
// encoding/json's own tokenizer: a key given twice in any object.
func refDuplicate(dec *json.Decoder) bool {
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		if d == '{' {
			kt, _ := dec.Token()
			k, _ := kt.(string)
			if seen[k] {
				return true
			}
			seen[k] = true
		}
		if refDuplicate(dec) {
			return true
		}
	}
	_, _ = dec.Token()
	return false
}

// The walker over raw bytes agrees with the tokenizer on every value
// encoding/json accepts (escapes, nesting, numbers, whitespace), and
// never panics.
func FuzzDecodeStrictKeys(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":{"b":[1,{"c":1,"c":2}]}}`, `{"\u0061":1,"a":2}`, `{"a\"":1,"a\"":2}`,
		`[{"x":"}\"{","x":null}]`, ` { "k" : [ ] , "l" : { } } `, `{"a":-1.5e3,"b":true,"c":null,"a":"x"}`,
		`"just a string"`, `12`, `{"` + manyKeys(20)[1:] + `}`, `{"k1":1,` + manyKeys(30) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		want := refDuplicate(json.NewDecoder(bytes.NewReader(b)))
		err := httpapi.DecodeJSON(b, &v)
		if (err != nil) != want {
			t.Fatalf("%q: walker %v, tokenizer says duplicate=%v", b, err, want)
		}
	})
}
