package server

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// Every management route of every protocol answers 500 internal_error, never
// 200, when the change it made cannot be recorded; with the write restored
// the same route answers 200 (CONTRACT.md persist.durable-before-200;
// edgemutants durable-*). Each step changes what is durable, so a write is
// due: the durable state is "a loaded" while the writes fail, then
// "a unloaded" (while a PUT and the loads after it fail to record a loaded).
func TestEveryManagerAnswers500WhenNotDurable(t *testing.T) {
	rs := newRestartable(t)
	a := rs.start()
	a.put("a", `{"engine":"fixture","slots":1}`)
	a.put("b", `{"engine":"fixture","slots":1}`)
	fail := func(on bool) {
		if !on {
			a.s.store.SetWriteHook(nil)
			return
		}
		a.s.store.SetWriteHook(func(*os.File, []byte) error { return errors.New("disk full") })
	}
	step := func(method, path, body string, want int) {
		t.Helper()
		r := a.do(method, path, body)
		if r.status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, want)
		}
		if want != 500 {
			return
		}
		if !strings.Contains(string(r.body), "durable") {
			t.Fatalf("%s %s: %s, want an error naming durability", method, path, r.body)
		}
		if !strings.HasPrefix(path, "/v2/") && r.errType(t) != "internal_error" { // /v2 has its own shape (oip.error-shape)
			t.Fatalf("%s %s: %s, want internal_error", method, path, r.body)
		}
	}
	fail(true)
	step("POST", "/v1/models/a/unload", "", 500)
	step("POST", "/v2/repository/models/a/unload", "", 500)
	step("POST", "/v1/models/unload", `{"models":["a"]}`, 500)
	step("DELETE", "/v1/models/b", "", 500)
	fail(false)
	step("POST", "/v1/models/a/unload", "", 200) // durable now: a unloaded
	fail(true)
	// A PUT of a's own spec commits no new config_version (nothing is
	// announced) but loads a: only its record after the commit is due
	// (edgemutants durable-apply).
	step("PUT", "/v1/models/a", `{"engine":"fixture","slots":1}`, 500)
	step("POST", "/v1/models/a/load", "", 500)
	step("POST", "/v2/repository/models/a/load", "", 500)
	fail(false)
	step("POST", "/v1/models/a/load", "", 200)
}
