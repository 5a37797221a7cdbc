package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/server/internal/oip"
)

// TestV2ReadyStartupModels: /v2/health/ready waits for the startup
// config's models (CONTRACT.md oip.ready): one whose first load fails
// keeps the server not ready until a load succeeds (or an operator's
// unload settles it); an operator's unload of a startup model that had
// loaded keeps the server ready, /readyz too, so a proxy's health check
// keeps the replica in rotation; models registered at run time do not
// count.
func TestV2ReadyStartupModels(t *testing.T) {
	ts := newServer(t, nil)
	spec := func(opts string) ModelSpec {
		var m ModelSpec
		if err := json.Unmarshal([]byte(`{"engine":"fixture","task":"asr","slots":1,"options":`+opts+`}`), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if err := ts.s.RegisterModels(context.Background(), []ModelEntry{
		{ID: "good", Spec: spec(`{}`)},
		{ID: "bad", Spec: spec(`{"fail_load":true}`)},
	}); err != nil {
		t.Fatal(err)
	}
	ts.serve()
	notReady := func(want string) {
		t.Helper()
		r := ts.must(400, "GET", "/v2/health/ready", "")
		var e oip.ErrorWire
		r.json(t, &e)
		if !strings.Contains(e.Error, want) || r.header.Get(oip.ErrorTypeHeader) != "not_ready" {
			t.Fatalf("not ready: %s %v, want a message naming %q", r.body, r.header, want)
		}
	}
	notReady(`"bad"`)
	ts.put("bad", `{"engine":"fixture","task":"asr","slots":1}`) // fixed: loads
	ts.must(200, "GET", "/v2/health/ready", "")
	ts.must(500, "PUT", "/v1/models/extra", `{"engine":"fixture","task":"asr","slots":1,"options":{"fail_load":true}}`) // registered, not loaded
	ts.must(200, "GET", "/v2/health/ready", "")
	ts.must(200, "POST", "/v2/repository/models/good/unload", "{}")
	ts.must(200, "GET", "/v2/health/ready", "")
	ts.must(200, "GET", "/readyz", "")
	ts.must(200, "POST", "/v2/repository/models/good/load", "")
	ts.must(200, "GET", "/v2/health/ready", "")
	// The fixed model's later failed load (its spec broken by a PUT) is
	// no readiness failure: only a failure at start is.
	ts.must(500, "PUT", "/v1/models/bad", `{"engine":"fixture","task":"asr","slots":1,"options":{"fail_load":true}}`)
	ts.must(200, "GET", "/v2/health/ready", "")
}

// TestV2ReadyStartupFailureUnloaded: a startup model whose first load
// failed holds readiness back until an operator acts on it; an unload is
// such an act (CONTRACT.md oip.ready).
func TestV2ReadyStartupFailureUnloaded(t *testing.T) {
	ts := newServer(t, nil)
	var m ModelSpec
	if err := json.Unmarshal([]byte(`{"engine":"fixture","task":"asr","slots":1,"options":{"fail_load":true}}`), &m); err != nil {
		t.Fatal(err)
	}
	if err := ts.s.RegisterModels(context.Background(), []ModelEntry{{ID: "bad", Spec: m}}); err != nil {
		t.Fatal(err)
	}
	ts.serve()
	ts.must(400, "GET", "/v2/health/ready", "")
	ts.must(200, "POST", "/v2/repository/models/bad/unload", "{}")
	ts.must(200, "GET", "/v2/health/ready", "")
}

// TestV2RoundTripEngines: flite speaks through the protocol into an INT16
// tensor, pocketsphinx transcribes that tensor back to its words, and
// Silero finds the speech in it sent as FP32 (CONTRACT.md oip.infer).
func TestV2RoundTripEngines(t *testing.T) {
	ts := startEngineServer(t, nil, catalogue.FliteSLT, catalogue.PocketsphinxEnUS, catalogue.SileroV5)
	ts.put("tts", fmt.Sprintf(`{"engine":"flite","task":"tts","checkpoint":%q,"slots":1}`, catalogue.FliteSLT))
	ts.put("asr", fmt.Sprintf(`{"engine":"pocketsphinx","task":"asr","checkpoint":%q,"slots":1}`, catalogue.PocketsphinxEnUS))
	ts.put("vad", fmt.Sprintf(`{"engine":"onnx","task":"vad","checkpoint":%q,"slots":1}`, catalogue.SileroV5))

	var speech struct {
		Outputs []struct {
			Name       string
			Datatype   string
			Shape      []int64
			Parameters struct {
				SampleRate int `json:"sample_rate"`
			}
			Data []int16
		}
	}
	ts.must(200, "POST", "/v2/models/tts/infer", `{"parameters":{"sample_rate":16000},"inputs":[{"name":"text","shape":[1],"datatype":"BYTES","data":["Open the garage door."]}],"outputs":[{"name":"audio","parameters":{"datatype":"INT16"}}]}`).json(t, &speech)
	if len(speech.Outputs) != 1 {
		t.Fatalf("speech outputs: %+v", speech.Outputs)
	}
	o := speech.Outputs[0]
	if o.Datatype != "INT16" || o.Parameters.SampleRate != 16000 || len(o.Data) < 8000 || len(o.Shape) != 1 || o.Shape[0] != int64(len(o.Data)) {
		t.Fatalf("speech: %s %d Hz shape %v, %d samples", o.Datatype, o.Parameters.SampleRate, o.Shape, len(o.Data))
	}
	samples, _ := json.Marshal(o.Data)
	var text struct{ Outputs []struct{ Data []string } }
	ts.must(200, "POST", "/v2/models/asr/infer", fmt.Sprintf(`{"parameters":{"sample_rate":16000},"inputs":[{"name":"audio","shape":[1,%d],"datatype":"INT16","data":%s}]}`, len(o.Data), samples)).json(t, &text)
	if len(text.Outputs) != 1 || len(text.Outputs[0].Data) != 1 {
		t.Fatalf("transcript: %+v", text)
	}
	heard := 0
	for _, w := range []string{"open", "the", "garage", "door"} {
		if strings.Contains(" "+text.Outputs[0].Data[0]+" ", " "+w+" ") {
			heard++
		}
	}
	if heard < 3 {
		t.Fatalf("transcript %q of %q", text.Outputs[0].Data[0], "open the garage door")
	}
	fp := make([]float32, len(o.Data))
	for i, v := range o.Data {
		fp[i] = float32(v) / 32768
	}
	fs, _ := json.Marshal(fp)
	var vad struct {
		Outputs []struct {
			Shape      []int64
			Data       []float32
			Parameters struct{ Duration float64 }
		}
	}
	ts.must(200, "POST", "/v2/models/vad/infer", fmt.Sprintf(`{"inputs":[{"name":"audio","shape":[%d],"datatype":"FP32","parameters":{"sample_rate":16000},"data":%s}]}`, len(fp), fs)).json(t, &vad)
	if len(vad.Outputs) != 1 || len(vad.Outputs[0].Shape) != 2 || vad.Outputs[0].Shape[0] < 1 || vad.Outputs[0].Shape[1] != 2 ||
		len(vad.Outputs[0].Data) != 2*int(vad.Outputs[0].Shape[0]) || vad.Outputs[0].Parameters.Duration <= 0 {
		t.Fatalf("voice activity: %+v", vad.Outputs)
	}
	if d := vad.Outputs[0].Data; d[0] < 0 || d[1] <= d[0] || float64(d[len(d)-1]) > vad.Outputs[0].Parameters.Duration+0.01 {
		t.Fatalf("segments %v outside the %v s of audio", d, vad.Outputs[0].Parameters.Duration)
	}
}
