package oip

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// TestDecodeDataShape: nested data must have the declared shape, row by
// row (CONTRACT.md oip.infer-invalid). On the old code ragged rows whose
// total matched the element count were flattened and accepted.
func TestDecodeDataShape(t *testing.T) {
	for _, c := range []struct {
		shape []int64
		data  string
		want  string // "" accepted, else a part of the 400's message
	}{
		{[]int64{4}, `[1,2,3,4]`, ""},
		{[]int64{2, 2}, `[1,2,3,4]`, ""},
		{[]int64{2, 2}, `[[1,2],[3,4]]`, ""},
		{[]int64{1, 3}, `[[1,2,3]]`, ""},
		{[]int64{1, 5}, `[[1,2],[3,4,5]]`, "2 rows"},
		{[]int64{2, 2}, `[[1],[2,3,4]]`, "row 0 has 1 elements"},
		{[]int64{2, 3}, `[[1,2,3],[4,5]]`, "row 1 has 2 elements"},
		{[]int64{5}, `[[1,2],[3,4,5]]`, "needs a 2-dimensional shape"},
		{[]int64{4}, `[1,2,3]`, "3 data elements"},
		{[]int64{2, 2}, `[1,2,3,4,5]`, "5 data elements"},
		{[]int64{2, 2}, `[[[1,2]],[[3,4]]]`, "not an array"},
	} {
		in := &V2InputTensor{Name: "audio", Datatype: "INT16", Shape: c.shape, Data: json.RawMessage(c.data)}
		n, err := elements(in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeData[int16](in, n)
		switch {
		case c.want == "" && (err != nil || len(got) != n):
			t.Errorf("%v %s: %v %v, want %d elements", c.shape, c.data, got, err, n)
		case c.want != "":
			var e *httpapi.Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Param != "data" || !strings.Contains(e.Message, c.want) ||
				!strings.Contains(e.Message, `"audio"`) {
				t.Errorf("%v %s: %v, want a 400 on data naming the input and %q", c.shape, c.data, err, c.want)
			}
		}
	}
}

// TestCheckVersion: a versioned route answers the advertised version, the
// config_version, and 404s any other naming both (CONTRACT.md
// oip.versions).
func TestCheckVersion(t *testing.T) {
	if err := checkVersion("m", "", 3); err != nil {
		t.Fatal(err)
	}
	if err := checkVersion("m", "3", 3); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1", "03", "x", "4"} {
		var e *httpapi.Error
		if err := checkVersion("m", v, 3); !errors.As(err, &e) || e.Status != http.StatusNotFound || !strings.Contains(e.Message, `"3"`) {
			t.Errorf("version %q: %v, want 404 naming version 3", v, err)
		}
	}
}

// TestWriteErrorNotReady: a health question's false carries "ready":
// false (and the model's name) beside the error; other errors only the
// error.
func TestWriteErrorNotReady(t *testing.T) {
	for _, c := range []struct {
		e    *httpapi.Error
		want string
	}{
		{v2False("", "not_ready", "model %q is unloaded", "a"), `{"ready":false,"error":"model \"a\" is unloaded"}`},
		{v2False("a", "shutting_down", "server is shutting down"), `{"name":"a","ready":false,"error":"server is shutting down"}`},
		{&httpapi.Error{Status: http.StatusNotFound, Type: "not_found_error", Message: "gone"}, `{"error":"gone"}`},
	} {
		w := httptest.NewRecorder()
		WriteError(w, c.e, c.e.Message)
		if got := strings.TrimSpace(w.Body.String()); got != c.want || w.Code != c.e.Status {
			t.Errorf("%d %s, want %d %s", w.Code, got, c.e.Status, c.want)
		}
	}
}
