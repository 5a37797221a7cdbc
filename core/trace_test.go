package core

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The trace format field by field: every event kind survives the round trip
// EventRecord, MarshalRecord, json, Record.Event; the submission timeouts'
// three encodings are exact; and every effect kind writes exactly the fields
// of its kind. The replay in workload_test.go reads events only, and spec's
// trace validator reads what the runtime and the simulator write: this is the
// test that pins each field.

func TestEventRecordRoundTrip(t *testing.T) {
	cfg := &Config{Task: "tts", Engine: "fixture", Checkpoint: "c", Options: `{"v":1}`, Slots: 3,
		AdmissionTimeout: 9, MaxQueue: 4, MemoryMB: 5, BaseVersion: 2, RegisterOnly: true}
	events := []Event{
		{Kind: EvSubmitRequest, Now: 1, Model: "a", Timeout: NoTimeout},
		{Kind: EvSubmitRequest, Now: 2, Model: "a", Timeout: 0},
		{Kind: EvSubmitRequest, Now: 3, Model: "a", Timeout: 7},
		{Kind: EvSubmitManager, Now: 4, Model: "a", Op: OpApply, Config: cfg, Timeout: NoTimeout},
		{Kind: EvSubmitManager, Now: 5, Model: "a", Op: OpLoad, Timeout: 0},
		{Kind: EvSubmitManager, Now: 6, Model: "a", Op: OpUnload, Timeout: 8},
		{Kind: EvSubmitBulkUnload, Now: 7, Models: []string{"a", "b"}, Timeout: NoTimeout},
		{Kind: EvCancel, Now: 8, Ticket: 3, Reason: ReasonTimeout, Timeout: NoTimeout},
		{Kind: EvCancel, Now: 9, Ticket: 4, Reason: ReasonDisconnect, Timeout: NoTimeout},
		{Kind: EvRelease, Now: 10, Ticket: 5, Failed: true, Timeout: NoTimeout},
		{Kind: EvRelease, Now: 11, Ticket: 6, Timeout: NoTimeout},
		{Kind: EvLoadDone, Now: 12, Job: 7, Capacity: 2, Timeout: NoTimeout},
		{Kind: EvLoadDone, Now: 13, Job: 8, Failed: true, Timeout: NoTimeout},
		{Kind: EvCloneDone, Now: 14, Job: 9, Failed: true, Timeout: NoTimeout},
		{Kind: EvProbeDone, Now: 15, Job: 10, Capacity: 16, Timeout: NoTimeout},
		{Kind: EvTeardownDone, Now: 16, Job: 11, Timeout: NoTimeout},
		{Kind: EvTick, Now: 17, Timeout: NoTimeout},
		{Kind: EvBeginShutdown, Now: 18, Timeout: NoTimeout},
	}
	for _, ev := range events {
		line, err := MarshalRecord(EventRecord(ev, 0))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(line), "}\n") || strings.Count(string(line), "\n") != 1 {
			t.Fatalf("%q is not one ndjson line", line)
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		back, err := r.Event()
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if !reflect.DeepEqual(back, ev) {
			t.Errorf("%s\nround trip %+v\nwant       %+v", line, back, ev)
		}
	}
}

func TestEventRecordFields(t *testing.T) {
	for _, c := range []struct {
		ev     Event
		ticket Ticket
		want   string
	}{
		// A submission records the ticket the machine returned.
		{Event{Kind: EvSubmitRequest, Now: 1, Model: "a", Timeout: NoTimeout}, 5, `{"ev":"SubmitRequest","t":1,"model":"a","ticket":5}`},
		// An explicit 0 (no wait) is -2, distinct from "not set".
		{Event{Kind: EvSubmitRequest, Now: 1, Model: "a", Timeout: 0}, 5, `{"ev":"SubmitRequest","t":1,"model":"a","timeout":-2,"ticket":5}`},
		{Event{Kind: EvSubmitManager, Now: 2, Model: "a", Op: OpLoad, Timeout: 3}, 6, `{"ev":"SubmitManager","t":2,"model":"a","op":"load","timeout":3,"ticket":6}`},
		// Without a returned ticket the event's own is kept.
		{Event{Kind: EvCancel, Now: 3, Ticket: 4, Reason: ReasonTimeout, Timeout: NoTimeout}, 0, `{"ev":"Cancel","t":3,"timeout":-1,"ticket":4,"reason":"timeout"}`},
		{Event{Kind: EvRelease, Now: 4, Ticket: 4, Timeout: NoTimeout}, 0, `{"ev":"Release","t":4,"timeout":-1,"ticket":4}`},
		{Event{Kind: EvLoadDone, Now: 5, Job: 2, Capacity: 1, Timeout: NoTimeout}, 0, `{"ev":"LoadDone","t":5,"timeout":-1,"job":2,"capacity":1}`},
		{Event{Kind: EvTick, Now: 6, Timeout: NoTimeout}, 0, `{"ev":"Tick","t":6,"timeout":-1}`},
	} {
		b, err := json.Marshal(EventRecord(c.ev, c.ticket))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%+v:\n got %s\nwant %s", c.ev, b, c.want)
		}
	}
}

func TestRecordEventErrors(t *testing.T) {
	for _, r := range []Record{{Ef: "Grant"}, {Ev: "Nope"}, {Ev: "None"}, {}} {
		if _, err := r.Event(); err == nil {
			t.Errorf("%+v: no error", r)
		}
	}
	// An empty op is none, whatever the op table's first name.
	ev, err := Record{Ev: "SubmitManager", Model: "a"}.Event()
	if err != nil || ev.Op != OpNone || ev.Timeout != NoTimeout || ev.Reason != 0 {
		t.Fatalf("%+v %v", ev, err)
	}
	// An unknown reason is no reason.
	if ev, err := (Record{Ev: "Cancel", Reason: "other"}).Event(); err != nil || ev.Reason != 0 {
		t.Fatalf("%+v %v", ev, err)
	}
}

func TestEffectRecordFields(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.SubmitManager(0, "a", OpApply, &Config{Slots: 2, RegisterOnly: true}, NoTimeout)
	cfg := &Config{Task: "vad", Slots: 2}
	for _, c := range []struct {
		e    Effect
		want string
	}{
		{Effect{Kind: EfGrant, Model: 0, Ticket: 3, Slot: 1, Version: 2}, `{"ef":"Grant","t":9,"model":"a","ticket":3,"slot":1,"version":2}`},
		{Effect{Kind: EfReject, Model: 0, Ticket: 3, Code: CodeServerBusy, Reason: RejectTimeout}, `{"ef":"Reject","t":9,"model":"a","ticket":3,"reason":"timeout","code":"server_busy"}`},
		// A reject's code and reason are written also when they are the zero ones.
		{Effect{Kind: EfReject, Model: 0, Ticket: 3}, `{"ef":"Reject","t":9,"model":"a","ticket":3,"code":"ok"}`},
		{Effect{Kind: EfPublish, Model: 0, Version: 2, Capacity: 4, Sessions: 2}, `{"ef":"Publish","t":9,"model":"a","capacity":4,"version":2,"sessions":2}`},
		{Effect{Kind: EfRetire, Model: 0, Version: 2, Sessions: 2, Cause: CauseIdle}, `{"ef":"Retire","t":9,"model":"a","version":2,"sessions":2,"cause":"idle"}`},
		{Effect{Kind: EfStartTeardown, Model: 0, Job: 4, Version: 2, Sessions: 1, Cause: CauseEvict}, `{"ef":"StartTeardown","t":9,"model":"a","job":4,"version":2,"sessions":1,"cause":"evict"}`},
		{Effect{Kind: EfStartLoad, Model: 0, Job: 5, Version: 3, Config: cfg}, `{"ef":"StartLoad","t":9,"model":"a","config":{"task":"vad","slots":2},"job":5,"version":3}`},
		{Effect{Kind: EfStartProbe, Model: 0, Job: 6, Config: cfg}, `{"ef":"StartProbe","t":9,"model":"a","config":{"task":"vad","slots":2},"job":6}`},
		// Only a load and a probe carry their config; a capacity only a publish.
		{Effect{Kind: EfStartClone, Model: 0, Job: 7, Index: 1, Version: 3, Config: cfg, Capacity: 9}, `{"ef":"StartClone","t":9,"model":"a","job":7,"version":3,"index":1}`},
		{Effect{Kind: EfDone, Model: 0, Ticket: 8, Bulk: &BulkResult{NotFound: []string{"x"}}}, `{"ef":"Done","t":9,"model":"a","ticket":8,"not_found":["x"]}`},
		{Effect{Kind: EfDone, Model: 0, Ticket: 8, Bulk: &BulkResult{Unloaded: []string{"a"}}}, `{"ef":"Done","t":9,"model":"a","ticket":8,"unloaded":["a"]}`},
		// No model: past the registry's end, and for ShutdownComplete.
		{Effect{Kind: EfDone, Model: 1, Ticket: 8}, `{"ef":"Done","t":9,"ticket":8}`},
		{Effect{Kind: EfShutdownComplete, Model: 0}, `{"ef":"ShutdownComplete","t":9}`},
	} {
		b, err := json.Marshal(m.EffectRecord(9, c.e))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%+v:\n got %s\nwant %s", c.e, b, c.want)
		}
	}
}
