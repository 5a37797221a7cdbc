package core

import (
	"encoding/json"
	"fmt"
)

// Record is one line of an ndjson trace: an event (Ev set, named after its
// TLA+ action) or an effect (Ef set). The live runtime and the simulator
// write the same records, and spec's trace validator and Replay read them.
// Submissions record the ticket the machine assigned, so later lines can
// refer to it.
type Record struct {
	Ev string `json:"ev,omitempty"`
	Ef string `json:"ef,omitempty"`
	T  int64  `json:"t"`

	Model   string       `json:"model,omitempty"`
	Models  []string     `json:"models,omitempty"`
	Op      string       `json:"op,omitempty"`
	Config  *TraceConfig `json:"config,omitempty"`
	Timeout int64        `json:"timeout,omitempty"`

	Ticket   uint64 `json:"ticket,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Failed   bool   `json:"failed,omitempty"`
	Job      uint64 `json:"job,omitempty"`
	Capacity int    `json:"capacity,omitempty"`

	Code     string   `json:"code,omitempty"`
	Slot     int32    `json:"slot,omitempty"`
	Version  uint64   `json:"version,omitempty"`
	Index    int32    `json:"index,omitempty"`
	Sessions int32    `json:"sessions,omitempty"`
	Cause    string   `json:"cause,omitempty"`
	Unloaded []string `json:"unloaded,omitempty"`
	NotFound []string `json:"not_found,omitempty"`
}

// TraceConfig is a Config as a trace writes it.
type TraceConfig struct {
	Task             string `json:"task,omitempty"`
	Engine           string `json:"engine,omitempty"`
	Checkpoint       string `json:"checkpoint,omitempty"`
	Options          string `json:"options,omitempty"`
	Slots            int    `json:"slots"`
	AdmissionTimeout int64  `json:"admission_timeout,omitempty"`
	MaxQueue         int    `json:"max_queue,omitempty"`
	MemoryMB         int64  `json:"memory_mb,omitempty"`
	BaseVersion      uint64 `json:"base_version,omitempty"`
	RegisterOnly     bool   `json:"register_only,omitempty"`
	Aliases          string `json:"aliases,omitempty"`
	VoiceMap         string `json:"voice_map,omitempty"`
}

func traceConfig(c *Config) *TraceConfig {
	if c == nil {
		return nil
	}
	return &TraceConfig{Task: c.Task, Engine: c.Engine, Checkpoint: c.Checkpoint, Options: c.Options, Slots: c.Slots,
		AdmissionTimeout: c.AdmissionTimeout, MaxQueue: c.MaxQueue, MemoryMB: c.MemoryMB,
		BaseVersion: c.BaseVersion, RegisterOnly: c.RegisterOnly, Aliases: c.Aliases, VoiceMap: c.VoiceMap}
}

func (tc *TraceConfig) config() *Config {
	if tc == nil {
		return nil
	}
	return &Config{Task: tc.Task, Engine: tc.Engine, Checkpoint: tc.Checkpoint, Options: tc.Options, Slots: tc.Slots,
		AdmissionTimeout: tc.AdmissionTimeout, MaxQueue: tc.MaxQueue, MemoryMB: tc.MemoryMB,
		BaseVersion: tc.BaseVersion, RegisterOnly: tc.RegisterOnly, Aliases: tc.Aliases, VoiceMap: tc.VoiceMap}
}

// EventRecord returns the trace record of ev; ticket is what a submission
// returned (0 otherwise). Call it after the event was applied.
func EventRecord(ev Event, ticket Ticket) Record {
	r := Record{Ev: ev.Kind.String(), T: ev.Now, Model: ev.Model, Models: ev.Models, Timeout: ev.Timeout,
		Ticket: uint64(ev.Ticket), Failed: ev.Failed, Job: uint64(ev.Job), Capacity: ev.Capacity}
	if ev.Op != OpNone {
		r.Op = ev.Op.String()
	}
	if ev.Reason != 0 {
		r.Reason = ev.Reason.String()
	}
	r.Config = traceConfig(ev.Config)
	if ticket != 0 {
		r.Ticket = uint64(ticket)
	}
	if ev.Kind == EvSubmitRequest || ev.Kind == EvSubmitManager {
		if ev.Timeout == NoTimeout {
			r.Timeout = 0
		} else if ev.Timeout == 0 {
			r.Timeout = -2 // explicit "unbounded"
		}
	}
	return r
}

// EffectRecord returns the trace record of effect e emitted at time now.
func (m *Machine) EffectRecord(now int64, e Effect) Record {
	id := ""
	if e.Kind != EfShutdownComplete && int(e.Model) < len(m.models) {
		id = m.models[e.Model].id
	}
	return EffectRecordOf(now, id, e)
}

// EffectRecordOf is EffectRecord for an effect whose model's ID is id ("" for
// none), for observers that have no machine.
func EffectRecordOf(now int64, id string, e Effect) Record {
	r := Record{Ef: e.Kind.String(), T: now, Ticket: uint64(e.Ticket), Slot: e.Slot, Version: e.Version,
		Job: uint64(e.Job), Index: e.Index, Sessions: e.Sessions, Model: id}
	if e.Kind == EfReject {
		r.Code = e.Code.String()
		r.Reason = e.Reason.String()
	}
	if e.Kind == EfPublish {
		r.Capacity = int(e.Capacity)
	}
	if e.Cause != CauseNone {
		r.Cause = e.Cause.String()
	}
	if e.Kind == EfStartProbe || e.Kind == EfStartLoad {
		r.Config = traceConfig(e.Config)
	}
	if e.Bulk != nil {
		r.Unloaded, r.NotFound = e.Bulk.Unloaded, e.Bulk.NotFound
	}
	return r
}

// Event turns an event record back into an Event for replay.
func (r Record) Event() (Event, error) {
	if r.Ev == "" {
		return Event{}, fmt.Errorf("core: record is not an event")
	}
	ev := Event{Now: r.T, Model: r.Model, Models: r.Models, Ticket: Ticket(r.Ticket), Failed: r.Failed,
		Job: Job(r.Job), Capacity: r.Capacity, Config: r.Config.config(), Timeout: NoTimeout}
	for k, n := range eventNames {
		if n == r.Ev {
			ev.Kind = EventKind(k)
		}
	}
	if ev.Kind == EvNone {
		return Event{}, fmt.Errorf("core: unknown event %q", r.Ev)
	}
	for k, n := range opNames {
		if n == r.Op && r.Op != "" {
			ev.Op = Op(k)
		}
	}
	switch r.Reason {
	case "timeout":
		ev.Reason = ReasonTimeout
	case "disconnect":
		ev.Reason = ReasonDisconnect
	}
	switch {
	case r.Timeout == -2:
		ev.Timeout = 0
	case r.Timeout > 0:
		ev.Timeout = r.Timeout
	}
	return ev, nil
}

// MarshalRecord encodes a record as one ndjson line (with the newline).
func MarshalRecord(r Record) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("core: trace record: %w", err)
	}
	return append(b, '\n'), nil
}
