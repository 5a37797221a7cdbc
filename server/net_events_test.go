package server

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/server/internal/events"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core/runtime"
)

// The edge's test net (docs/design.md "The edge's test net"): tests that
// kill hand-planted mutants (scripts/edgemutants) no other test killed.

// The event stream bounds each write on its own (events.Limits.WriteTimeout),
// not only through --write-timeout: with --write-timeout off, a client
// that stops reading is still dropped once a write blocks past the
// stream's limit, while the hub's buffer is large enough never to drop it
// for falling behind (edgemutants events-write-deadline).
func TestEventsWriteDeadlineAlone(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.WriteTimeout = 0 })
	ts.s.events.SetLimits(events.Limits{Ring: events.Ring, ClientBuf: 1 << 20, WriteTimeout: 100 * time.Millisecond})
	ts.put("a", `{"engine":"fixture","slots":4}`)
	c := ts.dialSmallBuffers()
	if _, err := fmt.Fprintf(c, "GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	ts.awaitClients(1)

	// Events until the stalled stream's handler gives up: its write blocks
	// once the small socket buffers are full, and only its own deadline
	// ends it. A bounded number of requests: the handler must have returned
	// long before.
	rt := ts.s.Runtime()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	gone := make(chan struct{})
	go func() { // awaitClients(0) without t.Fatal off the test's goroutine
		for {
			st, changed := ts.s.events.Watch()
			if st.Clients == 0 {
				close(gone)
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}()
	const atMost = 200000
	n := 0
	for ; n < atMost; n++ {
		select {
		case <-gone:
			if st, _ := ts.s.events.Watch(); st.Dropped != 0 {
				t.Fatalf("the stalled client was dropped for falling behind (%d), not by its write deadline", st.Dropped)
			}
			t.Logf("the stalled stream ended after %d requests", n)
			return
		default:
		}
		if _, err := rt.Infer(ctx, "a", backends.Request{Input: json.RawMessage(`1`)}, runtime.InferOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("the stalled event stream still open after %d requests: no write deadline ended it", n)
}
