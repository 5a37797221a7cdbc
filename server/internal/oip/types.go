package oip

import "encoding/json"

// The wire shapes of the Open Inference Protocol (KServe's v2 protocol,
// shared with Triton) over REST, and of Triton's model-repository
// extension (CONTRACT.md "The Open Inference Protocol"). Tensors are JSON
// only: the binary tensor extension is not served.

// V2ServerMetadata is the answer of GET /v2.
type V2ServerMetadata struct {
	Name       string   `json:"name"`
	Version    string   `json:"version"`
	Extensions []string `json:"extensions"`
}

// V2TensorMetadata describes one input or output of a model; -1 in a
// shape is a dimension of any size.
type V2TensorMetadata struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
	// Parameters is a Sluice extension: the tensor's parameters (for
	// example an audio output's sample_rate), as names and their meaning.
	Parameters map[string]string `json:"parameters,omitempty"`
}

// V2ModelMetadata is the answer of GET /v2/models/{m}.
type V2ModelMetadata struct {
	Name     string   `json:"name"`
	Versions []string `json:"versions"`
	Platform string   `json:"platform"`
	// Parameters lists the request parameters the model's task takes
	// (a Sluice extension), as names and their meaning.
	Parameters map[string]string  `json:"parameters,omitempty"`
	Inputs     []V2TensorMetadata `json:"inputs"`
	Outputs    []V2TensorMetadata `json:"outputs"`
}

// V2InferRequest is the body of POST /v2/models/{m}/infer.
type V2InferRequest struct {
	ID         string                     `json:"id,omitempty"`
	Parameters map[string]json.RawMessage `json:"parameters,omitempty"`
	Inputs     []V2InputTensor            `json:"inputs"`
	Outputs    []V2RequestedOutput        `json:"outputs,omitempty"`
}

// V2InputTensor is one input tensor: data is row-major, flat or nested.
type V2InputTensor struct {
	Name       string                     `json:"name"`
	Shape      []int64                    `json:"shape"`
	Datatype   string                     `json:"datatype"`
	Parameters map[string]json.RawMessage `json:"parameters,omitempty"`
	Data       json.RawMessage            `json:"data"`
}

// V2RequestedOutput names an output the client wants; its parameters may
// choose the datatype of an audio output (INT16 or FP32).
type V2RequestedOutput struct {
	Name       string                     `json:"name"`
	Parameters map[string]json.RawMessage `json:"parameters,omitempty"`
}

// V2InferResponse is the answer of POST /v2/models/{m}/infer. Outputs'
// data are written by writeV2Response, which streams audio samples.
type V2InferResponse struct {
	ModelName    string         `json:"model_name"`
	ModelVersion string         `json:"model_version"`
	ID           string         `json:"id"`
	Parameters   map[string]any `json:"parameters,omitempty"`
	Outputs      []v2Output     `json:"outputs"`
}

// v2Output is one output tensor: exactly one of its data fields is set.
type v2Output struct {
	Name       string         `json:"name"`
	Datatype   string         `json:"datatype"`
	Shape      []int64        `json:"shape"`
	Parameters map[string]any `json:"parameters,omitempty"`
	Data       any            `json:"data"`
}

// V2RepositoryIndexRequest is the optional body of POST /v2/repository/index.
type V2RepositoryIndexRequest struct {
	Ready bool `json:"ready,omitempty"` // only the models ready now
}

// V2RepositoryModel is one entry of the repository index.
type V2RepositoryModel struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	State   string `json:"state"` // UNAVAILABLE, LOADING, READY, UNLOADING
	Reason  string `json:"reason"`
}

// V2RepositoryRequest is the optional body of the repository's load and
// unload: Triton's parameters (a config override, files,
// unload_dependents) change what is loaded, which Sluice does through PUT
// /v1/models/{id}; any parameter is refused rather than ignored.
type V2RepositoryRequest struct {
	Parameters map[string]json.RawMessage `json:"parameters,omitempty"`
}
