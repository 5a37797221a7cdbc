package oip

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/sluice-dev/sluice/internal/strictjson"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// FuzzV2InferRequest: whatever body a client sends to
// /v2/models/{m}/infer, each task's check either refuses it with a 4xx
// *httpapi.Error (CONTRACT.md oip.infer-invalid) or builds an engine request whose
// audio is whole PCM16 samples, never panicking; its seeds run in make
// test, `make fuzz` fuzzes it.
func FuzzV2InferRequest(f *testing.F) {
	for _, s := range []string{
		`{"parameters":{"sample_rate":16000},"inputs":[{"name":"audio","shape":[2],"datatype":"INT16","data":[1,-2]}]}`,
		`{"inputs":[{"name":"audio","shape":[1,2],"datatype":"FP32","parameters":{"sample_rate":8000},"data":[[0.5,-1]]}]}`,
		`{"parameters":{"sample_rate":16000,"voice":"slt","speed":2},"inputs":[{"name":"text","shape":[1],"datatype":"BYTES","data":["Hi."]}],"outputs":[{"name":"audio","parameters":{"datatype":"INT16"}}]}`,
		`{"parameters":{"sample_rate":16000,"threshold":0.5,"min_speech_ms":10},"inputs":[{"name":"audio","shape":[0],"datatype":"INT16","data":[]}]}`,
		`{"inputs":[{"name":"audio","shape":[4194305],"datatype":"INT16","data":[]}]}`,
		`{"inputs":[{"name":"audio","shape":[-1],"datatype":"INT16","data":[1]}]}`,
		`{"inputs":[]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var req V2InferRequest
		if strictjson.Decode([]byte(body), &req) != nil {
			return
		}
		for name, task := range v2Tasks {
			breq, _, err := task.request(&req)
			if err != nil {
				var e *httpapi.Error
				if !errors.As(err, &e) || e.Status != http.StatusBadRequest {
					t.Fatalf("%s: refusal %v is not a 400 *httpapi.Error", name, err)
				}
				continue
			}
			if len(breq.Data)%2 != 0 || !json.Valid(breq.Input) {
				t.Fatalf("%s: engine request with %d bytes of audio, input %q", name, len(breq.Data), breq.Input)
			}
		}
	})
}
