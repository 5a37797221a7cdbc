package server

import (
	"bufio"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/core"
)

// Disconnect tests (CONTRACT.md phase.queued, time.disconnect-executing,
// time.disconnect-stream): raw clients close their connection at a known
// point, reached through fixture gates and scheduler records, never by
// sleeping.

// releaseBound is the contract's bound for a streaming client that goes
// away (CONTRACT.md phase.stream-deferred: "frees its slot within 100 ms").
const releaseBound = 100 * time.Millisecond

// A queued client that disconnects leaves the queue at once: its ticket is
// cancelled while the request ahead of it still holds the only slot.
func TestDisconnectQueued(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture","slots":1}`)
	rec := ts.records()
	var wg sync.WaitGroup
	defer wg.Wait()
	var first resp
	wg.Go(func() { first = ts.do("POST", "/v1/models/a/infer", `{"input":{"gate":"g"}}`) })
	ts.awaitGate("g", 1)
	rec.next("the first request", isEv(core.EvSubmitRequest, "a"))

	c := ts.rawConn()
	rawRequest(t, c, "POST", "/v1/models/a/infer", `{"input":1}`)
	queued := rec.next("the queued request", isEv(core.EvSubmitRequest, "a"))
	if m := ts.model("a"); m.QueuedRequests != 1 || m.ActiveSlots != 1 {
		t.Fatalf("before the disconnect: %+v", m)
	}
	c.Close()
	rec.next("the queued request's cancellation", func(r *core.Record) bool {
		return r.Ef == core.EfReject.String() && r.Ticket == queued.Ticket && r.Code == core.CodeCancelled.String()
	})
	if m := ts.model("a"); m.QueuedRequests != 0 || m.ActiveSlots != 1 {
		t.Fatalf("after the disconnect: %+v", m)
	}
	if ts.s.Fixture().Gates().Waiting("g") != 1 {
		t.Fatal("the first request no longer waits at its gate")
	}
	ts.s.Fixture().Gates().Open("g")
	wg.Wait()
	if first.status != 200 {
		t.Fatalf("%d %s", first.status, first.body)
	}
}

// A client that disconnects while its request executes: the engine call is
// cancelled through the request's context and the lease is released.
func TestDisconnectExecuting(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture","slots":1}`)
	rec := ts.records()
	c := ts.rawConn()
	rawRequest(t, c, "POST", "/v1/models/a/infer", `{"input":{"gate":"g"}}`)
	grant := rec.next("the grant", func(r *core.Record) bool { return r.Ef == core.EfGrant.String() })
	ts.awaitGate("g", 1)
	closed := time.Now()
	c.Close()
	rec.next("the release", isRelease(grant.Ticket))
	t.Logf("released %v after the disconnect", time.Since(closed))
	if m := ts.model("a"); m.ActiveSlots != 0 || m.State != "ready" {
		t.Fatalf("%+v", m)
	}
	ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`) // the slot serves the next request
}

// A client that disconnects mid-stream frees its slot within 100 ms.
func TestDisconnectStreaming(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture","slots":1,"options":{"chunks":5}}`)
	rec := ts.records()
	c := ts.rawConn()
	rawRequest(t, c, "POST", "/v1/models/a/infer", `{"input":{"chunk_gate":"cg"},"stream":true}`)
	grant := rec.next("the grant", func(r *core.Record) bool { return r.Ef == core.EfGrant.String() })
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if strings.Contains(line, `"chunk":0`) {
			break
		}
	}
	ts.awaitGate("cg", 1) // the engine waits after the first chunk
	closed := time.Now()
	c.Close()
	rec.nextWithin("the release within 100 ms of the disconnect", releaseBound, isRelease(grant.Ticket))
	t.Logf("released %v after the disconnect", time.Since(closed))
	if m := ts.model("a"); m.ActiveSlots != 0 {
		t.Fatalf("%+v", m)
	}
}

// A long stream whose client closes at once: whether the engine sees the
// cancelled context or a failed write first, the lease is released once.
func TestDisconnectLongStream(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture","slots":1}`)
	rec := ts.records()
	c := ts.rawConn()
	rawRequest(t, c, "POST", "/v1/models/a/infer", `{"input":{"chunks":10000},"stream":true}`)
	grant := rec.next("the grant", func(r *core.Record) bool { return r.Ef == core.EfGrant.String() })
	c.Close()
	rec.next("the release", isRelease(grant.Ticket))
	if m := ts.model("a"); m.ActiveSlots != 0 {
		t.Fatalf("%+v", m)
	}
}
