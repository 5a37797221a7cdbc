package strictjson

import (
	"encoding/json"
	"errors"
	"testing"
)

type inner struct {
	LoadMS int `json:"load_ms"`
}

type outer struct {
	Engine  string          `json:"engine"`
	Options inner           `json:"options"`
	List    []inner         `json:"list"`
	Raw     json.RawMessage `json:"raw"`
}

// Each refusal names its key (Param) and why (Code); what encoding/json
// would accept silently (a key twice, a key in the wrong case) is refused
// at any depth, also inside lists, and free-form values (RawMessage) are
// checked for duplicates only.
func TestDecodeNamesTheKey(t *testing.T) {
	for _, c := range []struct {
		in, param, code string
	}{
		{`{"engine":"a"}`, "", ""},
		{`{"engine":"a","engine":"b"}`, "engine", CodeDuplicate},
		{`{"options":{"load_ms":1,"load_ms":2}}`, "options.load_ms", CodeDuplicate},
		{`{"list":[{},{"LOAD_MS":1}]}`, "list[1].LOAD_MS", CodeCase},
		{`{"Engine":"a"}`, "Engine", CodeCase},
		{`{"raw":{"Any":1,"any":2}}`, "", ""},
		{`{"raw":{"x":1,"x":2}}`, "raw.x", CodeDuplicate},
		{`{"raw":{"n\"x":1,"n\"x":2}}`, `raw.n"x`, CodeDuplicate},
		{`{"raw":{"n\\":1,"n":0,"n\\":2}}`, `raw.n\`, CodeDuplicate},
		{`{"nope":1}`, "nope", CodeUnknown},
		{`{"options":{"load_ms":"1"}}`, "options.load_ms", CodeType},
		{`{"engine":"a"} x`, "", CodeSyntax},
		{`{"engine":"a"}{}`, "", CodeSyntax},
		{`{"engine":`, "", CodeSyntax},
		{``, "", CodeEmpty},
		{`  `, "", CodeEmpty},
	} {
		checkDecode(t, c.in, c.param, c.code, new(outer))
	}
}

type tree struct {
	Name     string  `json:"name"`
	Children []*tree `json:"children"`
	inner
}

// Strings with escaped quotes and backslashes end where JSON says; escaped
// keys are compared unescaped; a recursive type is checked at every depth;
// embedded fields are promoted.
func TestDecodeEscapesAndRecursion(t *testing.T) {
	for _, c := range []struct {
		in, param, code string
	}{
		{`{"name":"a\"b\\","children":[{"name":"\\\"","load_ms":2}]}`, "", ""},
		{`{"name":"x\\","name":"y"}`, "name", CodeDuplicate},
		{`{"n\u0061me":"a","name":"b"}`, "name", CodeDuplicate},
		{`{"children":[{"children":[{"NAME":"a"}]}]}`, "children[0].children[0].NAME", CodeCase},
		{`{"children":[{"Load_MS":1}]}`, "children[0].Load_MS", CodeCase},
		{`{"name":"\",\"name\":1"}`, "", ""},
		{`{"name":"a","children":[{"\u006eame":"b","n\u0061me":"c"}]}`, "children[0].name", CodeDuplicate},
	} {
		checkDecode(t, c.in, c.param, c.code, new(tree))
	}
}

// checkDecode decodes in into v: it must succeed when code is empty, else
// fail naming param with code.
func checkDecode(t *testing.T, in, param, code string, v any) {
	t.Helper()
	err := Decode([]byte(in), v)
	if code == "" {
		if err != nil {
			t.Errorf("%s: %v", in, err)
		}
		return
	}
	var se *Error
	if !errors.As(err, &se) || se.Param != param || se.Code != code {
		t.Errorf("%s: %#v, want param %q code %q", in, err, param, code)
	}
}
