package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/core"
)

// A task route's request that passed the task check and then queued
// behind a reconfigure that changed the model's task is refused 400
// wrong_task naming the new task, holding nothing: the check and the
// lease are one runtime decision on the lease's own snapshot (CONTRACT.md
// err.wrong-task). A separate check before the lease would have handed it
// a lease of the other task.
func TestTaskRouteQueuedBehindTaskChange(t *testing.T) {
	ts := startServer(t, nil)
	for _, c := range []struct{ id, route, body, from, to string }{
		{"s", "/v1/audio/speech", `{"model":"s","input":"hi"}`, "tts", "asr"},
		// A raw upload: the body is the audio whatever its Content-Type
		// (asyncDo sends application/json); the fixture never decodes it.
		{"a", "/v1/audio/transcriptions?model=a", "RIFF not really a wav", "asr", "tts"},
	} {
		ts.put(c.id, `{"engine":"fixture","slots":1,"task":"`+c.from+`"}`)
		rec := ts.records()
		hold := ts.asyncDo("POST", "/v1/models/"+c.id+"/infer", `{"input":{"gate":"g`+c.id+`"}}`)
		ts.awaitGate("g"+c.id, 1)
		re := ts.asyncDo("PUT", "/v1/models/"+c.id, `{"engine":"fixture","slots":1,"task":"`+c.to+`"}`)
		rec.next("the reconfigure queued", isEv(core.EvSubmitManager, c.id))
		late := ts.asyncDo("POST", c.route, c.body)
		rec.next("the task request queued behind it", isEv(core.EvSubmitRequest, c.id))
		ts.s.Fixture().Gates().Open("g" + c.id)
		if r := awaitResp(t, "the held request", hold); r.status != 200 {
			t.Fatalf("%s: held request: %d %s", c.id, r.status, r.body)
		}
		if r := awaitResp(t, "the reconfigure", re); r.status != 200 {
			t.Fatalf("%s: reconfigure: %d %s", c.id, r.status, r.body)
		}
		r := awaitResp(t, "the queued task request", late)
		var e errorBody
		if err := json.Unmarshal(r.body, &e); err != nil || r.status != 400 || e.Error.Code != "wrong_task" ||
			e.Error.Param != "model" || !strings.Contains(e.Error.Message, `"`+c.to+`"`) {
			t.Errorf("%s %s: %d %s, want 400 wrong_task naming %q", c.route, c.body, r.status, r.body, c.to)
		}
		if m := ts.model(c.id); m.ActiveSlots != 0 || m.QueuedRequests != 0 || m.Task != c.to {
			t.Errorf("%s: %+v", c.id, m)
		}
	}
}
