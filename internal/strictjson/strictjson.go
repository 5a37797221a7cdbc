// Package strictjson is the one strict JSON decoder of the server and the
// engines: one JSON value, and nothing after it; no unknown field; no key
// given twice in any object; no key that names a field only when case is
// ignored, at any nesting level (CONTRACT.md err.duplicate-keys:
// encoding/json would keep the last of two keys and match keys
// case-insensitively, so two readers of one body could disagree). Its
// errors say which key or field is at fault (Error.Param) and why
// (Error.Code), so every caller can name it in its 400.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
)

// The codes of an Error.
const (
	CodeEmpty     = "empty_body"        // no JSON value at all
	CodeSyntax    = "invalid_json"      // not JSON, or data after the value
	CodeType      = "invalid_type"      // a value of the wrong JSON type
	CodeUnknown   = "unknown_parameter" // a field the target does not have
	CodeDuplicate = "duplicate_key"     // a key given twice in one object
	CodeCase      = "misspelled_key"    // a key that matches a field only when case is ignored
)

// Error is a refused JSON value: what is wrong (Msg, which names the key
// where there is one), the key's path from the top-level value where one
// is at fault (Param, "options.load_ms", "models[2]"; "" for none) and a
// Code.
type Error struct {
	Param string
	Code  string
	Msg   string
	Err   error // encoding/json's error, when it said
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns encoding/json's error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Decode decodes the one JSON value of b into v strictly (see the package
// comment); every error is an *Error.
//
// A body that passes every check takes the fast path: json.Unmarshal
// (no Decoder, no copy of the body into its buffer) and one key pass
// that also refuses what DisallowUnknownFields would. Anything that pass
// or Unmarshal refuses, and every type whose JSON fields this package
// cannot name exactly as encoding/json does (shape.exact), goes the
// reference path, decodeRef, which alone words the errors: the two
// paths accept the same bodies with the same values (FuzzDecodeAgrees).
func Decode(b []byte, v any) error {
	t := reflect.TypeOf(v)
	if sh := shapeFor(t); (sh == nil || sh.exact) && json.Unmarshal(b, v) == nil {
		w := keyWalker{b: b, unknown: true}
		if w.value(sh) == nil {
			return nil
		}
	}
	return decodeRef(b, v, t)
}

// decodeRef is Decode by encoding/json's Decoder with
// DisallowUnknownFields, then the key pass: the reference whose errors
// callers see.
func decodeRef(b []byte, v any, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return &Error{Code: CodeEmpty, Msg: "empty: no JSON value", Err: err}
		}
		return classify(err)
	}
	if dec.More() {
		return &Error{Code: CodeSyntax, Msg: "trailing data after the JSON value"}
	}
	var rest [1]byte
	if n, _ := io.ReadFull(dec.Buffered(), rest[:]); n > 0 && !isSpace(rest[0]) {
		return &Error{Code: CodeSyntax, Msg: "trailing data after the JSON value"}
	}
	// The value decoded, so the body is well-formed and nested at most
	// encoding/json's 10,000 levels: the key pass cannot meet bad syntax
	// and its recursion is bounded.
	if err := checkKeys(b, t); err != nil {
		ke := err.(*keyError)
		code := CodeDuplicate
		if ke.misspelled {
			code = CodeCase
		}
		return &Error{Param: ke.path, Code: code, Msg: ke.Error()}
	}
	return nil
}

// classify turns encoding/json's decoding error into an *Error naming the
// field where it says one.
func classify(err error) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &Error{Param: te.Field, Code: CodeType, Msg: err.Error(), Err: err}
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if name, uerr := unquote(f); uerr == nil {
			return &Error{Param: name, Code: CodeUnknown, Msg: err.Error(), Err: err}
		}
	}
	return &Error{Code: CodeSyntax, Msg: err.Error(), Err: err}
}

func unquote(s string) (string, error) {
	var v string
	err := json.Unmarshal([]byte(s), &v)
	return v, err
}

// checkKeys walks one JSON value of b (already decoded by encoding/json,
// so well-formed and nested at most 10,000 levels) and refuses duplicate
// keys in any object, and keys that match a field of t (a struct, possibly
// behind pointers, slices, arrays or maps) only case-insensitively. A
// type that decodes itself (an interface, json.RawMessage or any other
// json.Unmarshaler) means the value's shape is free: only duplicates are
// checked. t's shape is computed once per type (shapeFor); the walk
// allocates nothing for a body without such keys, and the path of a
// refused key is built only on the way out of an error.
func checkKeys(b []byte, t reflect.Type) error {
	w := keyWalker{b: b}
	return w.value(shapeFor(t))
}

type keyWalker struct {
	b []byte
	i int
	// unknown: also refuse a key no field of its struct has in any case
	// (errUnknown), as DisallowUnknownFields does; the fast path's walk.
	unknown bool
}

// errUnknown is the fast path's walk meeting a key of no field: the
// reference path then words the refusal.
var errUnknown = errors.New("unknown field")

func (w *keyWalker) ws() {
	for w.i < len(w.b) && isSpace(w.b[w.i]) {
		w.i++
	}
}

// skipStr moves w.i past the string at w.i and returns the index of its
// closing quote: the first quote after an even number of backslashes.
func (w *keyWalker) skipStr() int {
	start := w.i + 1
	j := start
	for {
		k := bytes.IndexByte(w.b[j:], '"')
		if k < 0 { // cannot happen: decoded before
			w.i = len(w.b)
			return len(w.b)
		}
		j += k
		n := 0
		for p := j - 1; p >= start && w.b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			w.i = j + 1
			return j
		}
		j++
	}
}

// str reads a string at w.i and returns its value: a slice of b without
// escapes, else the unescaped bytes. Keys are short: a byte loop finds
// their end sooner than IndexByte's calls (skipStr, for values).
func (w *keyWalker) str() []byte {
	start := w.i + 1
	for j := start; j < len(w.b); j++ {
		switch w.b[j] {
		case '"':
			w.i = j + 1
			return w.b[start:j]
		case '\\':
			end := w.skipStr()
			var v string
			_ = json.Unmarshal(w.b[start-1:end+1], &v) // well-formed: decoded before
			return []byte(v)
		}
	}
	w.i = len(w.b) // cannot happen: decoded before
	return w.b[start:]
}

func (w *keyWalker) value(sh *shape) error {
	w.ws()
	if w.i >= len(w.b) {
		return nil
	}
	switch w.b[w.i] {
	case '"':
		w.skipStr()
		return nil
	case '[':
		w.i++
		var elem *shape
		if sh != nil && sh.list {
			elem = sh.elem
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
		var strct *shape
		var elem *shape
		if sh != nil && sh.strct {
			strct = sh
		} else if sh != nil && sh.mapping {
			elem = sh.elem
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
			if strct != nil {
				var exact bool
				if ft, exact = strct.field(key); !exact {
					for _, f := range strct.fields {
						if strings.EqualFold(f.name, string(key)) {
							return &keyError{path: string(key), msg: fmt.Sprintf("must be spelled %q", f.name), misspelled: true}
						}
					}
					if w.unknown {
						return errUnknown
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
type keyError struct {
	path, msg  string
	misspelled bool
}

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

// shape is what the key pass needs of a type: a struct's JSON field names
// with their values' shapes, or a list's or map's element shape. A nil
// *shape is a free value: one that decodes itself (an interface, a
// json.Unmarshaler such as json.RawMessage) or a scalar, where only
// duplicate keys are checked.
type shape struct {
	strct, list, mapping bool
	// exact: every struct reachable from here names its JSON fields as
	// encoding/json does (jsonFields); set on the shapes shapeFor
	// returns, and only they are read.
	exact  bool
	fields []fieldShape      // strct: in the struct's order
	byName map[string]*shape // strct with many fields
	elem   *shape            // list, mapping
}

type fieldShape struct {
	name string
	sh   *shape
}

// manyFields is where a struct's fields are looked up by map rather than
// by a scan of the slice.
const manyFields = 8

// field returns the shape of the field named key exactly, and whether
// there is one.
func (s *shape) field(key []byte) (*shape, bool) {
	if s.byName != nil {
		f, ok := s.byName[string(key)]
		return f, ok
	}
	for i := range s.fields {
		if s.fields[i].name == string(key) {
			return s.fields[i].sh, true
		}
	}
	return nil, false
}

// shapes caches shapeFor by type: the reflection runs once per type, not
// per body.
var shapes sync.Map // reflect.Type -> *shape

// shapeFor returns t's shape (see shape), computed once per type.
func shapeFor(t reflect.Type) *shape {
	if t == nil {
		return nil
	}
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	inexact := map[*shape]bool{}
	s := buildShape(t, map[reflect.Type]*shape{}, inexact)
	if s != nil {
		s.exact = len(inexact) == 0 // the shapes are this call's own (seen is new)
	}
	shapes.Store(t, s)
	return s
}

// buildShape computes t's shape; seen holds the shapes under
// construction, so a recursive type refers to itself.
// inexact collects the struct shapes whose fields jsonFields could not
// name exactly as encoding/json does.
func buildShape(t reflect.Type, seen map[reflect.Type]*shape, inexact map[*shape]bool) *shape {
	t = shapeOf(t)
	if t == nil {
		return nil
	}
	if s, ok := seen[t]; ok {
		return s
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		s := &shape{list: true}
		seen[t] = s
		s.elem = buildShape(t.Elem(), seen, inexact)
		return s
	case reflect.Map:
		s := &shape{mapping: true}
		seen[t] = s
		s.elem = buildShape(t.Elem(), seen, inexact)
		return s
	case reflect.Struct:
		s := &shape{strct: true}
		seen[t] = s
		names, types, exact := jsonFields(t)
		if !exact {
			inexact[s] = true
		}
		for i, name := range names {
			s.fields = append(s.fields, fieldShape{name: name, sh: buildShape(types[i], seen, inexact)})
		}
		if len(s.fields) > manyFields {
			s.byName = make(map[string]*shape, len(s.fields))
			for _, f := range s.fields {
				s.byName[f.name] = f.sh
			}
		}
		return s
	}
	return nil // a scalar: nothing inside to check
}

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

// jsonFields are the JSON names of a struct's fields with their types, in
// the struct's order, embedded structs' fields promoted as encoding/json
// does (a field of the outer struct wins over a promoted one of the same
// name). exact is false where encoding/json's rules could name the
// fields otherwise: two promoted fields of one name (encoding/json ranks
// them by depth and tags), an embedded struct that decodes itself, a tag
// name beyond the plain characters.
func jsonFields(t reflect.Type) (names []string, types []reflect.Type, exact bool) {
	exact = true
	at := map[string]int{}
	set := func(name string, ft reflect.Type, override bool) {
		if i, ok := at[name]; ok {
			if override {
				types[i] = ft
			} else {
				exact = false
			}
			return
		}
		at[name] = len(names)
		names = append(names, name)
		types = append(types, ft)
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if !plainName(name) {
			exact = false
		}
		if f.Anonymous && name == "" {
			et := shapeOf(f.Type)
			if et != nil && et.Kind() == reflect.Struct {
				en, ets, eexact := jsonFields(et)
				exact = exact && eexact
				for j := range en {
					set(en[j], ets[j], false)
				}
				continue
			}
			if et == nil {
				exact = false
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		set(name, f.Type, true)
	}
	return names, types, exact
}

// plainName reports whether a tag's name is made of ASCII letters,
// digits, '_', '-' and '.' only (or is empty), which encoding/json takes
// as it is.
func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }
