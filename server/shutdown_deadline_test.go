package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// CONTRACT.md ops.loading.shutdown and time.shutdown-cold-load: when the
// shutdown deadline cancels a cold load, the request waiting for it is
// answered 500 internal_error on its still-open connection before the
// server closes the connections that remain: the runtime cancels backend
// work a quarter of the timeout before the deadline (runtimeDeadline).
func TestShutdownDeadlineAnswersWaiters(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxLoadedModels = 1 })
	// w's registration is refused for lack of room (x is busy), so w is
	// registered and unloaded with a load gate nobody opens.
	ts.put("x", `{"engine":"fixture"}`)
	var wg sync.WaitGroup
	defer wg.Wait()
	post := func(path, body string) (int, string, error) {
		res, err := ts.client.Post(ts.url+path, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, string(b), err
	}
	xDone := make(chan struct{})
	wg.Go(func() {
		defer close(xDone)
		if code, body, err := post("/v1/models/x/infer", `{"input":{"gate":"gx"}}`); code != 200 {
			t.Errorf("x: %d %s %v", code, body, err)
		}
	})
	ts.awaitGate("gx", 1)
	ts.must(503, "PUT", "/v1/models/w", `{"engine":"fixture","options":{"gates":{"load":"never"}}}`)
	ts.s.Fixture().Gates().Open("gx")
	<-xDone
	type answer struct {
		code int
		body string
		err  error
	}
	waiter := make(chan answer, 1)
	wg.Go(func() {
		code, body, err := post("/v1/models/w/infer", `{"input":1}`)
		waiter <- answer{code, body, err}
	})
	ts.awaitGate("never", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond) // the waiter gets 300 ms to be answered
	defer cancel()
	ts.deadlineExpected = true
	if err := ts.s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown past its deadline: %v", err)
	}
	a := <-waiter
	if a.err != nil || a.code != http.StatusInternalServerError || !strings.Contains(a.body, `"internal_error"`) {
		t.Fatalf("the waiter of the cancelled load: %d %q %v, want 500 internal_error", a.code, a.body, a.err)
	}
	if !strings.Contains(ts.logs.String(), "shutdown deadline passed") {
		t.Fatal("the deadline is not logged")
	}
}
