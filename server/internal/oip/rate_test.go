package oip

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// TestSampleRateUploadBound: an audio input's sample_rate, as a request or
// an input parameter, is bounded by the upload bound the engines keep
// (audio.MaxUploadRate, CONTRACT.md engine.upload-bounds, oip.infer): at
// the bound it passes, past it it is a 400 naming sample_rate, before any
// engine would refuse it naming file.
func TestSampleRateUploadBound(t *testing.T) {
	for _, where := range []string{"request", "input"} {
		for rate, ok := range map[int]bool{audio.MinRate: true, audio.MaxUploadRate: true, audio.MaxUploadRate + 1: false, audio.MinRate - 1: false} {
			body := fmt.Sprintf(`{"parameters":{"sample_rate":%d},"inputs":[{"name":"audio","shape":[2],"datatype":"INT16","data":[1,-2]}]}`, rate)
			if where == "input" {
				body = fmt.Sprintf(`{"inputs":[{"name":"audio","shape":[2],"datatype":"INT16","parameters":{"sample_rate":%d},"data":[1,-2]}]}`, rate)
			}
			var req V2InferRequest
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatal(err)
			}
			_, got, err := pcmInput(&req)
			var he *httpapi.Error
			switch {
			case ok && (err != nil || got != rate):
				t.Errorf("%s sample_rate %d: rate %d, %v", where, rate, got, err)
			case !ok && (!errors.As(err, &he) || he.Param != "sample_rate"):
				t.Errorf("%s sample_rate %d: %v, want a 400 naming sample_rate", where, rate, err)
			}
		}
	}
}
