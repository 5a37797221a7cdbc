package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"sync"
)

// decodeStrict decodes one JSON value from r's body into v: a Content-Type
// other than application/json is 415 before anything is read (requireJSON);
// unknown, duplicate and case-folded fields, trailing data and bodies over
// the limit are 400 invalid_request_error. It reads the whole body first
// (readBody), so the connection's body phase ends before the handler goes
// on.
func decodeStrict(r *http.Request, v any) error {
	if err := requireJSON(r); err != nil {
		return err
	}
	b, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeJSONStrict(b, v)
}

// readBody reads r's JSON body to its end, bounded by the JSON limit
// (--max-json-body, 413 over it, refused before any read when the declared
// length is over it), and then tells the connection tracker that the body
// phase is over, which lifts every read deadline (the shutdown slice's and
// the body reader's, CONTRACT.md time.shutdown-stalled-io, edge.body-timeout)
// before net/http's background read starts watching for a disconnect: a
// read deadline left on a connection whose body was consumed would cancel
// the request's context. A body that timed out keeps its expired deadline:
// its answer (408) closes the connection.
func readBody(r *http.Request) ([]byte, error) {
	limit := int64(1 << 20)
	if l := limitsFrom(r.Context()); l != nil {
		limit = l.maxJSON
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = &http.MaxBytesError{Limit: limit}
	}
	if c := connFrom(r.Context()); c != nil && !bodyFailed(err) {
		c.bodyDone()
	}
	if err != nil {
		return nil, bodyError("reading the request body", err)
	}
	return b, nil
}

// requireJSON refuses a JSON route's request unless its Content-Type is
// application/json (parameters such as charset allowed): 415
// invalid_request_error unsupported_media_type (CONTRACT.md
// err.content-type). A browser can send text/plain or a form cross-site
// without a preflight; it cannot send application/json so.
func requireJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return nil
	}
	msg := "Content-Type must be application/json"
	if ct == "" {
		msg += " (the request has none)"
	} else {
		msg += fmt.Sprintf(", not %q", ct)
	}
	return &Error{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Code: "unsupported_media_type", Message: msg}
}

func tooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "body_too_large",
		Message: fmt.Sprintf("request body over %d bytes", limit)}
}

// decodeBytesStrict decodes one JSON value into v strictly: unknown fields
// and trailing data are errors (encoding/json), and so are a key given
// twice in any object and a key that names a field of v only when case is
// ignored, at every nesting level (CONTRACT.md err.duplicate-keys:
// encoding/json would keep the last of two keys and match keys
// case-insensitively, so two readers of one body could disagree).
func decodeBytesStrict(body io.Reader, v any) error {
	b, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return tooLarge(tooBig.Limit)
		}
		return Invalid("reading the request body: %v", err)
	}
	return decodeJSONStrict(b, v)
}

// decodeJSONStrict is decodeBytesStrict on a body already read.
func decodeJSONStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return Invalid("request body is empty")
		}
		return Invalid("invalid JSON body: %v", err)
	}
	if dec.More() {
		return Invalid("invalid JSON body: trailing data after the JSON value")
	}
	var rest [1]byte
	if n, _ := io.ReadFull(dec.Buffered(), rest[:]); n > 0 && !isSpace(rest[0]) {
		return Invalid("invalid JSON body: trailing data after the JSON value")
	}
	// The value decoded, so the body is well-formed and nested at most
	// encoding/json's 10,000 levels: the key pass cannot meet bad syntax
	// and its recursion is bounded.
	if err := checkKeys(b, reflect.TypeOf(v)); err != nil {
		return Invalid("invalid JSON body: %v", err)
	}
	return nil
}

// checkKeys walks one JSON value of b (already decoded by encoding/json,
// so well-formed and nested at most 10,000 levels) and refuses duplicate
// keys in any object, and keys that match a field of t (a struct, possibly
// behind pointers, slices, arrays or maps) only case-insensitively. t nil
// (an interface, json.RawMessage or any other type with its own decoding)
// means the value's shape is free: only duplicates are checked. It
// allocates nothing for a body without such keys; the path of a refused
// key is built only on the way out of an error.
func checkKeys(b []byte, t reflect.Type) error {
	w := keyWalker{b: b}
	return w.value(t)
}

type keyWalker struct {
	b []byte
	i int
}

func (w *keyWalker) ws() {
	for w.i < len(w.b) && isSpace(w.b[w.i]) {
		w.i++
	}
}

// str reads a string at w.i and returns its value: a slice of b without
// escapes, else the unescaped bytes.
func (w *keyWalker) str() []byte {
	start, esc := w.i+1, false
	j := start
	for ; j < len(w.b) && w.b[j] != '"'; j++ {
		if w.b[j] == '\\' {
			esc = true
			j++
		}
	}
	w.i = j + 1
	if !esc {
		return w.b[start:j]
	}
	var v string
	_ = json.Unmarshal(w.b[start-1:j+1], &v) // well-formed: decoded before
	return []byte(v)
}

func (w *keyWalker) value(t reflect.Type) error {
	w.ws()
	if w.i >= len(w.b) {
		return nil
	}
	switch w.b[w.i] {
	case '"':
		w.str()
		return nil
	case '[':
		w.i++
		t = shapeOf(t)
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for n := 0; ; n++ {
			w.ws()
			if w.i >= len(w.b) || w.b[w.i] == ']' {
				w.i++
				return nil
			}
			if err := w.value(elem); err != nil {
				return within(err, fmt.Sprintf("[%d]", n))
			}
			w.ws()
			if w.i < len(w.b) && w.b[w.i] == ',' {
				w.i++
			}
		}
	case '{':
		w.i++
		t = shapeOf(t)
		var fields map[string]reflect.Type
		var elem reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			fields = jsonFields(t)
		} else if t != nil && t.Kind() == reflect.Map {
			elem = t.Elem()
		}
		var seen keySet
		for {
			w.ws()
			if w.i >= len(w.b) || w.b[w.i] == '}' {
				w.i++
				return nil
			}
			key := w.str()
			if seen.add(key) {
				return &keyError{path: string(key), msg: "is given twice"}
			}
			ft := elem
			if fields != nil {
				var exact bool
				if ft, exact = fields[string(key)]; !exact {
					for name := range fields {
						if strings.EqualFold(name, string(key)) {
							return &keyError{path: string(key), msg: fmt.Sprintf("must be spelled %q", name)}
						}
					}
				}
			}
			w.ws()
			w.i++ // ':'
			if err := w.value(ft); err != nil {
				return within(err, "."+string(key))
			}
			w.ws()
			if w.i < len(w.b) && w.b[w.i] == ',' {
				w.i++
			}
		}
	}
	// A number, true, false or null.
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return nil
		}
		w.i++
	}
	return nil
}

// keyError is a refused key with its path from the top-level value.
type keyError struct{ path, msg string }

func (e *keyError) Error() string { return fmt.Sprintf("key %q %s", e.path, e.msg) }

// within prefixes a keyError's path with the step that led to it ("[2]"
// or ".name"; the top-level step drops its dot).
func within(err error, step string) error {
	if ke, ok := err.(*keyError); ok {
		if strings.HasPrefix(ke.path, "[") {
			ke.path = step + ke.path
		} else {
			ke.path = step + "." + ke.path
		}
		ke.path = strings.TrimPrefix(ke.path, ".")
	}
	return err
}

// keySet is the keys of one object so far: a fixed array for the usual
// small objects, a map past that, so a hostile object with many keys
// costs linear time.
type keySet struct {
	few  [16][]byte
	n    int
	many map[string]bool
}

// add adds key and reports whether it was there already.
func (k *keySet) add(key []byte) bool {
	if k.many != nil {
		if k.many[string(key)] {
			return true
		}
		k.many[string(key)] = true
		return false
	}
	for _, s := range k.few[:k.n] {
		if bytes.Equal(s, key) {
			return true
		}
	}
	if k.n < len(k.few) {
		k.few[k.n] = key
		k.n++
		return false
	}
	k.many = make(map[string]bool, 2*len(k.few))
	for _, s := range k.few {
		k.many[string(s)] = true
	}
	k.many[string(key)] = true
	return false
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// shapeOf returns t without pointers, or nil when t decodes itself (a
// json.Unmarshaler such as json.RawMessage) or is an interface.
func shapeOf(t reflect.Type) reflect.Type {
	for t != nil {
		if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) || t.Kind() == reflect.Interface {
			return nil
		}
		if t.Kind() != reflect.Pointer {
			return t
		}
		t = t.Elem()
	}
	return nil
}

// fieldCache holds jsonFields by struct type.
var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields are the JSON names of a struct's fields with their types,
// embedded structs' fields promoted as encoding/json does (cached).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			if et := shapeOf(f.Type); et != nil && et.Kind() == reflect.Struct {
				for k, v := range jsonFields(et) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	fieldCache.Store(t, out)
	return out
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// validName reports whether s matches [A-Za-z0-9._-]{1,max} (without a
// regexp: it runs on every request).
func validName(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validModelID checks a model ID against [A-Za-z0-9._-]{1,128}; "." and ".."
// are refused too, since IDs may name folders.
func validModelID(id string) error {
	if !validName(id, 128) || id == "." || id == ".." {
		return Invalid("model id %q must match [A-Za-z0-9._-]{1,128}", id)
	}
	return nil
}

// DecodeModelSpec decodes a model spec (the JSON body of PUT
// /v1/models/{id}) strictly: unknown fields and trailing data are errors.
func DecodeModelSpec(b []byte, s *ModelSpec) error {
	return decodeJSONStrict(b, s)
}
