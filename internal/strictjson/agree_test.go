package strictjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// Shapes the fast path must treat as encoding/json does: promoted fields
// of one name at two depths (inexact: the reference path decides), a map
// of structs, a free value.
type (
	deepName struct {
		Name string `json:"name"`
	}
	promoted struct {
		deepName
		Also struct {
			deepName
		}
		Other *otherName
	}
	otherName struct {
		Name int `json:"name"`
	}
	clash struct {
		deepName
		*otherName
	}
	mapped struct {
		By  map[string]inner `json:"by"`
		Any any              `json:"any"`
	}
)

var agreeTargets = []func() any{
	func() any { return new(outer) },
	func() any { return new(tree) },
	func() any { return new(promoted) },
	func() any { return new(clash) },
	func() any { return new(mapped) },
	func() any { return new(any) },
	func() any { return new(map[string]inner) },
	func() any { return new([]inner) },
	func() any { return new(json.RawMessage) },
}

// FuzzDecodeAgrees: Decode (its fast path where it applies) and the
// reference path decodeRef give the same error, and on success the same
// value, for every body and every target type.
func FuzzDecodeAgrees(f *testing.F) {
	for _, s := range []string{
		`{"engine":"a","options":{"load_ms":1},"list":[{"load_ms":2}],"raw":{"x":[1,2]}}`,
		`{"engine":"a","engine":"b"}`, `{"Engine":"a"}`, `{"nope":1}`, `{"options":{"nope":1}}`,
		`{"list":[{"load_ms":1,"x":2}]}`, `{"options":{"load_ms":"1"},"nope":1}`, `{"nope":1,"options":{"load_ms":"1"}}`,
		`{"name":"a","children":[{"name":"b","load_ms":3,"LoadMS":4}]}`, `{"name":"a","Name":"b"}`,
		`{"Also":{"name":"x"},"Other":{"name":1}}`, `{"name":1}`, `{"by":{"a":{"load_ms":1},"b":{"zz":1}}}`,
		`{"any":{"a":1,"a":2}}`, `[{"load_ms":1},{"load_ms":2,"q":0}]`, `{"engine":"a"} x`, `{"engine":"a"}{}`,
		``, ` `, `null`, `{"engine":null}`, `{"k\u0065y":1}`, `{"raw":1} `, `"s"`, `[1,`, `{"\u212a":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, target := range agreeTargets {
			fast, ref := target(), target()
			ferr := Decode(b, fast)
			rerr := decodeRef(b, ref, reflect.TypeOf(ref))
			if (ferr == nil) != (rerr == nil) {
				t.Fatalf("%T %q: Decode %v, reference %v", fast, b, ferr, rerr)
			}
			if rerr != nil {
				var fe, re *Error
				if !errors.As(ferr, &fe) || !errors.As(rerr, &re) || fe.Param != re.Param || fe.Code != re.Code || fe.Msg != re.Msg {
					t.Fatalf("%T %q: Decode %#v, reference %#v", fast, b, ferr, rerr)
				}
				continue
			}
			if !reflect.DeepEqual(fast, ref) {
				t.Fatalf("%T %q: Decode gave %#v, reference %#v", fast, b, fast, ref)
			}
		}
	})
}

// The fast path is taken where the shapes are exact and only there: a
// struct with two promoted fields of one name goes the reference path.
func TestExactShapes(t *testing.T) {
	for _, c := range []struct {
		v     any
		exact bool
	}{{new(outer), true}, {new(tree), true}, {new(mapped), true}, {new(clash), false}, {new(promoted), true}} {
		if sh := shapeFor(reflect.TypeOf(c.v)); sh.exact != c.exact {
			t.Errorf("%T: exact %v, want %v", c.v, sh.exact, c.exact)
		}
	}
}
