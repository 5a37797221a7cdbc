package server

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// A server_busy refused for a load backoff carries the remaining backoff as
// its Retry-After, in whole seconds rounded up, at least 1; every other
// server_busy says 1 (CONTRACT.md fail.load-backoff, err.server-busy).
func TestRetryAfterFromTheBackoff(t *testing.T) {
	for _, c := range []struct {
		left time.Duration
		want string
	}{{0, "1"}, {time.Nanosecond, "1"}, {700 * time.Millisecond, "1"}, {2 * time.Second, "2"},
		{2*time.Second + time.Millisecond, "3"}, {time.Minute, "60"}} {
		cause := &runtime.Error{Code: core.CodeServerBusy, Msg: "busy", RetryAfter: c.left}
		w := httptest.NewRecorder()
		httpapi.WriteError(w, httptest.NewRequest("GET", "/", nil), httpapi.FromCode(core.CodeServerBusy, "busy", cause))
		if got := w.Header().Get("Retry-After"); got != c.want || w.Code != 503 {
			t.Errorf("backoff %v: %d Retry-After %q, want 503 %q", c.left, w.Code, got, c.want)
		}
	}
}
