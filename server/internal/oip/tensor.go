package oip

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// The tensors of each task under the inference protocol (CONTRACT.md
// oip.infer): every input, output and parameter is checked before a lease
// is taken, and anything the task cannot honour is a 400 naming it.
//
//	tts  input  text   BYTES [1]           parameters sample_rate (8000..48000,
//	                                        default 24000), voice, speed
//	     output audio  FP32 [n] in [-1, 1) (or INT16 with the requested
//	                   output's parameters.datatype), parameters.sample_rate
//	asr  input  audio  INT16 or FP32 [n] or [1, n], PCM mono; sample_rate
//	                   (request or tensor parameter, required), language
//	     output text   BYTES [1]
//	vad  input  audio  as asr; threshold, min_speech_ms, min_silence_ms,
//	                   speech_pad_ms
//	     output segments FP32 [k, 2]: start and end seconds of each
//	                   stretch of speech; parameters.duration

// v2Task is one task's tensors.
type v2Task struct {
	inputs, outputs []V2TensorMetadata
	params          map[string]string
	request         func(*V2InferRequest) (backends.Request, v2Plan, error)
	answer          func(backends.Output, v2Plan) ([]v2Output, error)
}

// v2Plan is what a checked request asks of its answer.
type v2Plan struct {
	rate     int    // tts: the output rate
	datatype string // tts: FP32 or INT16
}

// Bounds of a protocol request beyond --max-json-body: elements of one
// tensor, and samples of a tts answer (about three minutes at 24 kHz; a
// longer synthesis is /v1/audio/speech's, which streams).
const (
	maxV2Elements      = 1 << 22
	maxV2OutputSamples = 1 << 22
)

var audioInput = V2TensorMetadata{Name: "audio", Datatype: "INT16", Shape: []int64{-1},
	Parameters: map[string]string{"sample_rate": "the rate of the PCM samples, 1000..192000 (required here or in the request's parameters); FP32 samples in [-1, 1] are accepted too"}}

var v2Tasks = map[string]v2Task{
	"tts": {
		inputs: []V2TensorMetadata{{Name: "text", Datatype: "BYTES", Shape: []int64{1}}},
		outputs: []V2TensorMetadata{{Name: "audio", Datatype: "FP32", Shape: []int64{-1},
			Parameters: map[string]string{"sample_rate": "the rate of the samples", "datatype": "request FP32 (default, in [-1, 1)) or INT16 in the requested output's parameters"}}},
		params: map[string]string{"sample_rate": "output rate, 8000..48000 (default 24000)", "voice": "one of the model's voices (GET /v1/audio/voices)",
			"speed": "0.25..4 (default 1)"},
		request: ttsRequest,
		answer:  ttsOutputs,
	},
	"asr": {
		inputs:  []V2TensorMetadata{audioInput},
		outputs: []V2TensorMetadata{{Name: "text", Datatype: "BYTES", Shape: []int64{1}}},
		params:  map[string]string{"sample_rate": "the input's rate", "language": "ISO-639-1 code (default: the model's)"},
		request: asrRequest,
		answer:  asrOutputs,
	},
	"vad": {
		inputs: []V2TensorMetadata{audioInput},
		outputs: []V2TensorMetadata{{Name: "segments", Datatype: "FP32", Shape: []int64{-1, 2},
			Parameters: map[string]string{"duration": "seconds of input audio"}}},
		params: map[string]string{"sample_rate": "the input's rate", "threshold": "speech probability threshold in (0, 1)",
			"min_speech_ms": "shortest speech kept", "min_silence_ms": "shortest silence that ends speech", "speech_pad_ms": "padding of each segment"},
		request: vadRequest,
		answer:  vadOutputs,
	},
}

// maxParamName bounds an unknown parameter echoed in an error (as the
// OpenAI routes bound theirs).
const maxParamName = 64

// v2Invalid is a 400 invalid_request_error naming the offending field.
func v2Invalid(param, format string, args ...any) *httpapi.Error {
	return httpapi.InvalidParam(param, format, args...)
}

// checkParams refuses parameters outside allowed (sorted in the message).
func checkParams(where string, p map[string]json.RawMessage, allowed ...string) error {
	for k := range p {
		if !slices.Contains(allowed, k) {
			if len(k) > maxParamName {
				k = k[:maxParamName] + "..."
			}
			sort.Strings(allowed)
			acc := "none"
			if len(allowed) > 0 {
				acc = strings.Join(allowed, ", ")
			}
			return v2Invalid(k, "%s parameter %q is not supported (accepted: %s)", where, k, acc)
		}
	}
	return nil
}

// paramInt decodes an integer parameter in lo..hi; absent leaves *v.
func paramInt(p map[string]json.RawMessage, name string, lo, hi int, v *int) error {
	raw, ok := p[name]
	if !ok {
		return nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil || n < lo || n > hi {
		return v2Invalid(name, "parameter %s must be an integer %d..%d", name, lo, hi)
	}
	*v = n
	return nil
}

// paramFloat decodes a number parameter; absent leaves *v.
func paramFloat(p map[string]json.RawMessage, name string, v *float64) error {
	raw, ok := p[name]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return v2Invalid(name, "parameter %s must be a number", name)
	}
	return nil
}

// paramString decodes a string parameter; absent leaves *v.
func paramString(p map[string]json.RawMessage, name string, v *string) error {
	raw, ok := p[name]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return v2Invalid(name, "parameter %s must be a string", name)
	}
	return nil
}

// oneInput returns the request's only input, which must be named name.
func oneInput(req *V2InferRequest, name string) (*V2InputTensor, error) {
	if len(req.Inputs) != 1 {
		return nil, v2Invalid("inputs", "the model takes exactly one input, %q; the request has %d", name, len(req.Inputs))
	}
	in := &req.Inputs[0]
	if in.Name != name {
		return nil, v2Invalid("inputs", "unknown input %.64q (the model's input is %q)", in.Name, name)
	}
	return in, nil
}

// elements checks a shape (at most two dimensions, none negative, the
// product bounded) and returns its element count.
func elements(in *V2InputTensor) (int, error) {
	if len(in.Shape) == 0 || len(in.Shape) > 2 {
		return 0, v2Invalid("shape", "input %q: shape must have 1 or 2 dimensions, got %d", in.Name, len(in.Shape))
	}
	n := int64(1)
	for _, d := range in.Shape {
		if d < 0 || d > maxV2Elements {
			return 0, v2Invalid("shape", "input %q: dimension %d outside 0..%d", in.Name, d, maxV2Elements)
		}
		if n *= d; n > maxV2Elements {
			return 0, v2Invalid("shape", "input %q: more than %d elements", in.Name, maxV2Elements)
		}
	}
	return int(n), nil
}

// decodeData decodes a tensor's data into a []T of exactly n elements
// (n the product of its shape): flat, in row-major order, or nested as
// its shape says, one array per row of a two-dimensional shape. Nested
// data must have the shape's rows, each of the shape's length: ragged
// rows, or rows against a one-dimensional shape, are a 400 naming the
// data (CONTRACT.md oip.infer-invalid), not flattened into a count that
// happens to match.
func decodeData[T any](in *V2InputTensor, n int) ([]T, error) {
	var flat []T
	if err := json.Unmarshal(in.Data, &flat); err != nil {
		var nested [][]T
		if err2 := json.Unmarshal(in.Data, &nested); err2 != nil {
			return nil, v2Invalid("data", "input %q: data is not an array of %s values: %v", in.Name, in.Datatype, err)
		}
		if len(in.Shape) != 2 {
			return nil, v2Invalid("data", "input %q: nested data for shape %v: nested data needs a 2-dimensional shape, one array per row", in.Name, in.Shape)
		}
		if int64(len(nested)) != in.Shape[0] {
			return nil, v2Invalid("data", "input %q: %d rows of data for shape %v (%d rows)", in.Name, len(nested), in.Shape, in.Shape[0])
		}
		flat = make([]T, 0, n)
		for k, row := range nested {
			if int64(len(row)) != in.Shape[1] {
				return nil, v2Invalid("data", "input %q: data row %d has %d elements, shape %v wants %d in every row", in.Name, k, len(row), in.Shape, in.Shape[1])
			}
			flat = append(flat, row...)
		}
	}
	if len(flat) != n {
		return nil, v2Invalid("data", "input %q: %d data elements for shape %v (%d elements)", in.Name, len(flat), in.Shape, n)
	}
	return flat, nil
}

// requestedOutput checks the request's outputs: none, or only name; it
// returns the parameters of name's entry.
func requestedOutput(req *V2InferRequest, name string) (map[string]json.RawMessage, error) {
	if len(req.Outputs) > 1 {
		return nil, v2Invalid("outputs", "the model has one output, %q; the request asks for %d", name, len(req.Outputs))
	}
	if len(req.Outputs) == 0 {
		return nil, nil
	}
	if o := req.Outputs[0]; o.Name != name {
		return nil, v2Invalid("outputs", "unknown output %.64q (the model's output is %q)", o.Name, name)
	}
	return req.Outputs[0].Parameters, nil
}

// ttsRequest checks a tts request: one BYTES text, sample_rate, voice,
// speed; the output's datatype.
func ttsRequest(req *V2InferRequest) (backends.Request, v2Plan, error) {
	plan := v2Plan{rate: audio.PCMRate, datatype: "FP32"}
	fail := func(err error) (backends.Request, v2Plan, error) { return backends.Request{}, plan, err }
	in, err := oneInput(req, "text")
	if err != nil {
		return fail(err)
	}
	if in.Datatype != "BYTES" {
		return fail(v2Invalid("datatype", "input text must be BYTES, not %.16q", in.Datatype))
	}
	if err := checkParams("input", in.Parameters); err != nil {
		return fail(err)
	}
	n, err := elements(in)
	if err != nil {
		return fail(err)
	}
	if n != 1 {
		return fail(v2Invalid("shape", "input text must hold one string (shape [1]), got %d elements", n))
	}
	texts, err := decodeData[string](in, 1)
	if err != nil {
		return fail(err)
	}
	if err := checkParams("request", req.Parameters, "sample_rate", "voice", "speed"); err != nil {
		return fail(err)
	}
	p := audio.TTSRequest{Text: texts[0], Format: "pcm"}
	if err := paramInt(req.Parameters, "sample_rate", audio.MinOutputRate, audio.MaxOutputRate, &plan.rate); err != nil {
		return fail(err)
	}
	if err := paramString(req.Parameters, "voice", &p.Voice); err != nil {
		return fail(err)
	}
	if err := paramFloat(req.Parameters, "speed", &p.Speed); err != nil {
		return fail(err)
	}
	p.SampleRate = plan.rate
	op, err := requestedOutput(req, "audio")
	if err != nil {
		return fail(err)
	}
	if err := checkParams("output", op, "datatype"); err != nil {
		return fail(err)
	}
	if err := paramString(op, "datatype", &plan.datatype); err != nil {
		return fail(err)
	}
	if plan.datatype != "FP32" && plan.datatype != "INT16" {
		return fail(v2Invalid("datatype", "output audio's datatype must be FP32 or INT16, not %.16q", plan.datatype))
	}
	breq, err := p.Request(false)
	if err != nil {
		return fail(httpapi.InvalidRequest(err))
	}
	return breq, plan, nil
}

// ttsOutputs turns the engine's PCM16LE into the audio tensor.
func ttsOutputs(out backends.Output, plan v2Plan) ([]v2Output, error) {
	if len(out.Data) == 0 || !strings.HasPrefix(out.ContentType, "audio/pcm") {
		return nil, &httpapi.Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "the engine produced no audio",
			Err: fmt.Errorf("tts output %q, %d bytes", out.ContentType, len(out.Data))}
	}
	samples, err := audio.PCM16(out.Data)
	if err != nil {
		return nil, &httpapi.Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "the engine's audio is malformed", Err: err}
	}
	if len(samples) > maxV2OutputSamples {
		return nil, &httpapi.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "output_too_large",
			Message: fmt.Sprintf("the speech is %d samples, over the protocol answer's %d: ask for a lower sample_rate or less text, or use /v1/audio/speech, which streams", len(samples), maxV2OutputSamples)}
	}
	o := v2Output{Name: "audio", Datatype: plan.datatype, Shape: []int64{int64(len(samples))}, Parameters: map[string]any{"sample_rate": plan.rate}}
	if plan.datatype == "INT16" {
		o.Data = samples
	} else {
		o.Data = audio.Float32(samples)
	}
	return []v2Output{o}, nil
}

// pcmInput checks an audio input (INT16 or FP32 PCM, [n] or [1, n]) and
// its sample_rate (the request's or the tensor's parameter), returning the
// samples as PCM16LE bytes and the rate.
func pcmInput(req *V2InferRequest) ([]byte, int, error) {
	in, err := oneInput(req, "audio")
	if err != nil {
		return nil, 0, err
	}
	if err := checkParams("input", in.Parameters, "sample_rate"); err != nil {
		return nil, 0, err
	}
	n, err := elements(in)
	if err != nil {
		return nil, 0, err
	}
	if len(in.Shape) == 2 && in.Shape[0] != 1 {
		return nil, 0, v2Invalid("shape", "input audio is mono: shape [n] or [1, n], not %v", in.Shape)
	}
	if n == 0 {
		return nil, 0, v2Invalid("data", "input audio is empty")
	}
	rate := 0
	if err := paramInt(in.Parameters, "sample_rate", audio.MinRate, audio.MaxUploadRate, &rate); err != nil {
		return nil, 0, err
	}
	reqRate := 0
	if err := paramInt(req.Parameters, "sample_rate", audio.MinRate, audio.MaxUploadRate, &reqRate); err != nil {
		return nil, 0, err
	}
	switch {
	case rate == 0 && reqRate == 0:
		return nil, 0, v2Invalid("sample_rate", "the audio's sample_rate is required (a request or input parameter)")
	case rate != 0 && reqRate != 0 && rate != reqRate:
		return nil, 0, v2Invalid("sample_rate", "the request's sample_rate %d and the input's %d differ", reqRate, rate)
	case rate == 0:
		rate = reqRate
	}
	var samples []int16
	switch in.Datatype {
	case "INT16":
		if samples, err = decodeData[int16](in, n); err != nil {
			return nil, 0, err
		}
	case "FP32":
		f, err := decodeData[float32](in, n)
		if err != nil {
			return nil, 0, err
		}
		samples = make([]int16, len(f))
		for i, v := range f {
			if !(v >= -1 && v <= 1) {
				return nil, 0, v2Invalid("data", "input audio: FP32 sample %d is %v, outside [-1, 1]", i, v)
			}
			samples[i] = int16(max(math.MinInt16, min(math.MaxInt16, math.Round(float64(v)*32768))))
		}
	default:
		return nil, 0, v2Invalid("datatype", "input audio must be INT16 or FP32, not %.16q", in.Datatype)
	}
	return audio.PCM16Bytes(samples), rate, nil
}

// asrRequest checks an asr request: PCM audio, sample_rate, language.
func asrRequest(req *V2InferRequest) (backends.Request, v2Plan, error) {
	if err := checkParams("request", req.Parameters, "sample_rate", "language"); err != nil {
		return backends.Request{}, v2Plan{}, err
	}
	if _, err := requestedOutput(req, "text"); err != nil {
		return backends.Request{}, v2Plan{}, err
	}
	data, rate, err := pcmInput(req)
	if err != nil {
		return backends.Request{}, v2Plan{}, err
	}
	a := audio.AudioRequest{SampleRate: rate}
	if err := paramString(req.Parameters, "language", &a.Language); err != nil {
		return backends.Request{}, v2Plan{}, err
	}
	in, err := json.Marshal(a)
	if err != nil {
		return backends.Request{}, v2Plan{}, fmt.Errorf("server: encode asr input: %w", err)
	}
	return backends.Request{Input: in, Data: data}, v2Plan{}, nil
}

// asrOutputs is the transcript as one BYTES element.
func asrOutputs(out backends.Output, _ v2Plan) ([]v2Output, error) {
	var res audio.ASRResult
	if err := json.Unmarshal(out.JSON, &res); err != nil {
		return nil, &httpapi.Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "not a transcription model", Err: err}
	}
	return []v2Output{{Name: "text", Datatype: "BYTES", Shape: []int64{1}, Data: []string{res.Text}}}, nil
}

// vadRequest checks a vad request: PCM audio, sample_rate and the
// detector's overrides (the engine checks their ranges).
func vadRequest(req *V2InferRequest) (backends.Request, v2Plan, error) {
	fail := func(err error) (backends.Request, v2Plan, error) { return backends.Request{}, v2Plan{}, err }
	if err := checkParams("request", req.Parameters, "sample_rate", "threshold", "min_speech_ms", "min_silence_ms", "speech_pad_ms"); err != nil {
		return fail(err)
	}
	if _, err := requestedOutput(req, "segments"); err != nil {
		return fail(err)
	}
	data, rate, err := pcmInput(req)
	if err != nil {
		return fail(err)
	}
	v := audio.VADRequest{SampleRate: rate}
	if err := paramFloat(req.Parameters, "threshold", &v.Threshold); err != nil {
		return fail(err)
	}
	if v.Threshold < 0 || v.Threshold >= 1 || (req.Parameters["threshold"] != nil && v.Threshold == 0) {
		return fail(v2Invalid("threshold", "parameter threshold must be in (0, 1)"))
	}
	for name, p := range map[string]*int{"min_speech_ms": &v.MinSpeechMS, "min_silence_ms": &v.MinSilenceMS, "speech_pad_ms": &v.SpeechPadMS} {
		if err := paramInt(req.Parameters, name, 1, math.MaxInt32, p); err != nil {
			return fail(err)
		}
	}
	in, err := json.Marshal(v)
	if err != nil {
		return fail(fmt.Errorf("server: encode vad input: %w", err))
	}
	return backends.Request{Input: in, Data: data}, v2Plan{}, nil
}

// vadOutputs is the segments as a [k, 2] FP32 tensor of seconds.
func vadOutputs(out backends.Output, _ v2Plan) ([]v2Output, error) {
	var res audio.VADResult
	if err := json.Unmarshal(out.JSON, &res); err != nil {
		return nil, &httpapi.Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "not a voice-activity model", Err: err}
	}
	data := make([]float32, 0, 2*len(res.Segments))
	for _, s := range res.Segments {
		data = append(data, float32(s.Start), float32(s.End))
	}
	return []v2Output{{Name: "segments", Datatype: "FP32", Shape: []int64{int64(len(res.Segments)), 2}, Data: data,
		Parameters: map[string]any{"duration": res.Duration}}}, nil
}

// encodeV2Response encodes an answer, newline-terminated.
func encodeV2Response(r *V2InferResponse) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("server: encode answer: %w", err)
	}
	return append(b, '\n'), nil
}
