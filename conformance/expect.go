package conformance

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// headerMatches reports whether a header value is want: the same text, or,
// for want written "LO..HI", an integer in that closed range (a
// Retry-After that counts down while the case runs).
func headerMatches(got, want string) bool {
	lo, hi, ok := strings.Cut(want, "..")
	if !ok {
		return got == want
	}
	l, err1 := strconv.Atoi(lo)
	h, err2 := strconv.Atoi(hi)
	n, err3 := strconv.Atoi(got)
	return err1 == nil && err2 == nil && err3 == nil && l <= n && n <= h
}

// check compares an answer with an expectation (nil: 200). Every error
// answer must have the API's one error shape (CONTRACT.md err.shape).
func (r *caseRun) check(a *answer, e *Expect) error {
	if e == nil {
		e = &Expect{}
	}
	switch {
	case e.Disconnected:
		if !a.disconnected {
			return fmt.Errorf("want a disconnected call, got %s", a.summary())
		}
		return nil
	case a.disconnected:
		return fmt.Errorf("call was disconnected, want an answer")
	case e.Any:
		return nil
	case e.Failed:
		if a.err == nil {
			return fmt.Errorf("want the exchange to fail at the transport level, got %s", a.summary())
		}
		return nil
	case a.err != nil && a.status == 0:
		return fmt.Errorf("exchange failed: %w", a.err)
	}
	status := e.Status
	if status == 0 {
		status = 200
	}
	if a.status != status {
		return fmt.Errorf("status %d, want %d: %s", a.status, status, a.summary())
	}
	if a.err != nil && !e.ErrorEventSet() {
		return fmt.Errorf("answer not read completely: %w", a.err)
	}
	v2 := isV2Path(a.path)
	if a.status >= 400 && !a.head {
		shape := errorShape
		if v2 {
			shape = v2ErrorShape
		}
		if err := shape(a.body); err != nil {
			return err
		}
	}
	if e.Error != "" {
		var eb struct {
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		typ := ""
		if v2 { // the protocol's body has only a message; the type is a header (oip.error-shape)
			typ = a.header.Get("Sluice-Error-Type")
		} else if err := json.Unmarshal(a.body, &eb); err == nil {
			typ = eb.Error.Type
		}
		if typ != e.Error {
			return fmt.Errorf("error type %q, want %q: %s", typ, e.Error, a.summary())
		}
	}
	for _, want := range e.Text {
		line, err := r.expand(want)
		if err != nil {
			return err
		}
		if !slices.Contains(strings.Split(string(a.body), "\n"), line) {
			return fmt.Errorf("answer has no line %q", line)
		}
	}
	for i, want := range e.Items {
		got, _ := decodeJSON(a.body).([]any)
		w := r.mapValue(want)
		if !slices.ContainsFunc(got, func(g any) bool { return subset(w, g) }) {
			return fmt.Errorf("answer has no element matching items[%d] %s: %s", i, jsonText(w), a.summary())
		}
	}
	if e.RetryAfter != nil && (a.header.Get("Retry-After") != "") != *e.RetryAfter {
		return fmt.Errorf("Retry-After %q, want present=%v", a.header.Get("Retry-After"), *e.RetryAfter)
	}
	for k, v := range e.Header {
		if got := a.header.Get(k); !headerMatches(got, v) {
			return fmt.Errorf("header %s=%q, want %q", k, got, v)
		}
	}
	if e.Body != nil {
		var want any = r.mapValue(map[string]any(e.Body))
		got := decodeJSON(a.body)
		if len(a.events) > 0 && got == nil {
			got = decodeJSON([]byte(a.events[len(a.events)-1]))
		}
		ok := subset(want, got)
		if e.Exact {
			ok = equalJSON(want, got)
		}
		if !ok {
			return fmt.Errorf("body %s, want %s", jsonText(got), jsonText(want))
		}
	}
	if e.Chunks != nil && len(a.events) != *e.Chunks {
		return fmt.Errorf("%d stream events, want %d", len(a.events), *e.Chunks)
	}
	if e.Done != nil && a.done != *e.Done {
		return fmt.Errorf("stream [DONE]=%v, want %v", a.done, *e.Done)
	}
	if e.ErrorEvent != nil && a.errorEvent != *e.ErrorEvent {
		return fmt.Errorf("stream error event=%v, want %v", a.errorEvent, *e.ErrorEvent)
	}
	if e.WithinMS > 0 {
		took := a.got.Sub(a.sent)
		if limit := time.Duration(float64(e.WithinMS)*r.slack) * time.Millisecond; took > limit {
			return fmt.Errorf("answered after %s, want within %dms (slack %.1f)", took.Round(time.Millisecond), e.WithinMS, r.slack)
		}
	}
	return nil
}

// ErrorEventSet reports whether the expectation is about a stream that
// ended with an error event (whose body may end abruptly).
func (e *Expect) ErrorEventSet() bool { return e.ErrorEvent != nil && *e.ErrorEvent }

// errorShape checks OpenAI's {"error":{"message","type","param","code"}}
// and nothing else: message and type strings, param and code each a string
// or null.
func errorShape(b []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return fmt.Errorf("error answer is not one JSON object (err.shape): %q", b)
	}
	if len(top) != 1 || top["error"] == nil {
		return fmt.Errorf("error answer must be {\"error\":{...}} only (err.shape): %s", b)
	}
	var inner map[string]any
	if err := json.Unmarshal(top["error"], &inner); err != nil {
		return fmt.Errorf("error object (err.shape): %w", err)
	}
	for _, k := range []string{"message", "type"} {
		if _, ok := inner[k].(string); !ok {
			return fmt.Errorf("error object lacks string %q (err.shape): %s", k, b)
		}
	}
	for _, k := range []string{"param", "code"} {
		v, ok := inner[k]
		if _, str := v.(string); !ok || (v != nil && !str) {
			return fmt.Errorf("error object lacks %q as a string or null (err.shape): %s", k, b)
		}
	}
	if len(inner) != 4 {
		return fmt.Errorf("error object has fields beyond message, type, param and code (err.shape): %s", b)
	}
	return nil
}

// isV2Path reports whether a request path is one of the inference
// protocol's routes (/v2, /v2/...).
func isV2Path(p string) bool {
	p, _, _ = strings.Cut(p, "?")
	return p == "/v2" || strings.HasPrefix(p, "/v2/")
}

// v2ErrorShape checks the inference protocol's {"error": "<message>"} and
// nothing else (CONTRACT.md oip.error-shape).
func v2ErrorShape(b []byte) error {
	var top map[string]any
	if err := json.Unmarshal(b, &top); err != nil {
		return fmt.Errorf("error answer is not one JSON object (oip.error-shape): %q", b)
	}
	n := len(top)
	if ready, ok := top["ready"]; ok { // a health question's false (oip.ready, oip.model-ready)
		if ready != false {
			return fmt.Errorf("error answer with ready other than false (oip.error-shape): %s", b)
		}
		n--
		if name, ok := top["name"].(string); ok && name != "" {
			n--
		}
	}
	if msg, ok := top["error"].(string); n != 1 || !ok || msg == "" {
		return fmt.Errorf("error answer must be {\"error\": \"message\"} only, with ready false and the model's name on a health answer (oip.error-shape): %s", b)
	}
	return nil
}

// subset reports whether want is contained in got: objects by key, arrays
// element by element with equal length, scalars equal.
func subset(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !subset(wv, gv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !subset(w[i], g[i]) {
				return false
			}
		}
		return true
	}
	return equalJSON(want, got)
}

// equalJSON compares two decoded JSON values.
func equalJSON(a, b any) bool {
	return jsonText(a) == jsonText(b)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
