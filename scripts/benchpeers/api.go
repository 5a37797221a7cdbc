package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/backends"
)

// The stand-ins serve the part of Sluice's API the workloads use, with the
// same shapes, so a client cannot tell the designs apart but by their
// scheduling:
//
//	POST /v1/models/{id}/infer  {"input": ...} -> {"id","output","config_version","slot"}
//	PUT  /v1/models/{id}        a Sluice model spec -> 200 once the new config serves
//
// Refusals are 503 with Sluice's error body, unknown models 404, bad bodies
// 400, engine failures 500.

// scheduler is one design's scheduling, behind the common HTTP front.
type scheduler interface {
	// infer runs one request for model under ctx (the client's request).
	infer(ctx context.Context, model string, input json.RawMessage) (answer, error)
	// apply replaces model's config and returns once the new one serves
	// (or, where the design loads on demand, once the old one is gone).
	apply(ctx context.Context, model string, spec backends.Spec) error
	// close stops the design's goroutines and closes every pool.
	close()
}

// Errors a scheduler answers with; the front maps them to HTTP.
var (
	errBusy    = errors.New("server busy")
	errUnknown = errors.New("model not found")
)

// specBody is the part of Sluice's model spec (server.ModelSpec) the
// workloads send.
type specBody struct {
	Engine     string          `json:"engine"`
	Checkpoint string          `json:"checkpoint,omitempty"`
	Task       string          `json:"task,omitempty"`
	Slots      int             `json:"slots,omitempty"`
	Options    json.RawMessage `json:"options,omitempty"`
	MaxQueue   *int            `json:"max_queue,omitempty"`
}

// backendSpec is the engine's view of a spec (the checkpoint resolved
// under root).
func (b specBody) backendSpec(model, root string, version uint64) backends.Spec {
	opts := b.Options
	if len(opts) == 0 {
		opts = json.RawMessage("{}")
	}
	cp := b.Checkpoint
	if cp != "" && root != "" {
		cp = root + "/" + cp
	}
	slots := b.Slots
	if slots == 0 {
		slots = 1
	}
	return backends.Spec{Model: model, Version: version, Task: b.Task, Engine: b.Engine, Checkpoint: cp,
		Options: opts, Slots: slots}
}

type inferBody struct {
	Input json.RawMessage `json:"input"`
}

type answerBody struct {
	ID            string          `json:"id"`
	Output        json.RawMessage `json:"output"`
	ConfigVersion uint64          `json:"config_version"`
	Slot          int             `json:"slot"`
}

// serveFront serves s over loopback and returns its base URL and a stop
// function that closes the listener and then the scheduler.
func serveFront(s scheduler, root string) (string, func(), error) {
	r := chi.NewRouter()
	var serial atomic.Uint64
	r.Post("/v1/models/{id}/infer", func(w http.ResponseWriter, r *http.Request) {
		var body inferBody
		if err := decodeBody(r, &body); err != nil || body.Input == nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "bad request body")
			return
		}
		id := strconv.FormatUint(serial.Add(1), 16)
		a, err := s.infer(r.Context(), chi.URLParam(r, "id"), body.Input)
		if err != nil {
			writeSchedError(w, err)
			return
		}
		b, _ := json.Marshal(answerBody{ID: id, Output: a.Output.JSON, ConfigVersion: a.Version, Slot: a.Slot})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(b, '\n'))
	})
	r.Put("/v1/models/{id}", func(w http.ResponseWriter, r *http.Request) {
		var body specBody
		if err := decodeBody(r, &body); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "bad spec")
			return
		}
		id := chi.URLParam(r, "id")
		if err := s.apply(r.Context(), id, body.backendSpec(id, root, 0)); err != nil {
			writeSchedError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":` + strconv.Quote(id) + "}\n"))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.close()
		return "", nil, err
	}
	hs := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln)
	}()
	return "http://" + ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		<-done
		s.close()
	}, nil
}

// decodeBody decodes a bounded, strict JSON body, as Sluice does.
func decodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func writeSchedError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errBusy):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "server_busy", err.Error())
	case errors.Is(err, errUnknown):
		writeError(w, http.StatusNotFound, "not_found_error", err.Error())
	case errors.Is(err, backends.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal_error", err.Error())
	}
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": typ}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// models is the registry every stand-in starts from: the specs of the
// workload's models, by ID.
type models map[string]backends.Spec

func (m models) get(id string) (backends.Spec, error) {
	s, ok := m[id]
	if !ok {
		return backends.Spec{}, fmt.Errorf("%w: %s", errUnknown, id)
	}
	return s, nil
}
