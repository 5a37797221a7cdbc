package runtime

import (
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

// Live invariant checks (Options.LiveInvariants) walk the machine once per
// N events (more apart as the registry and the live tickets grow), so their
// cost is bounded whatever the traffic; a correct core never trips them.
func TestLiveInvariantsSampled(t *testing.T) {
	e := newEnv(t, core.Options{}, withoutChecks(), withLive(4))
	e.apply("a", spec(2, `{}`)) // SubmitManager, LoadDone, CloneDone
	e.rt.mu.Lock()
	checks, events := e.rt.live.checks, e.rt.live.next
	e.rt.mu.Unlock()
	if events != 3 || checks != 0 {
		t.Fatalf("after a registration: %d checks for %d events, want 0 for 3", checks, events)
	}
	for range 20 { // 40 client events: a submit and a release each
		if _, err := e.rt.Infer(bg, "a", backends.Request{}, InferOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.rt.mu.Lock()
	checks, events, window := e.rt.live.checks, e.rt.live.next, e.rt.windowLocked()
	e.rt.mu.Unlock()
	// One model and at most one live ticket: one check per 4 events.
	if events != 43 || checks != 43/4 {
		t.Fatalf("%d checks for %d events, want %d", checks, events, 43/4)
	}
	if n := e.rt.InvariantViolations(); n != 0 {
		t.Fatalf("%d violations on a correct core", n)
	}
	if lines := len(splitLines(window)); lines != liveWindow {
		t.Fatalf("the window holds %d events, want the last %d:\n%s", lines, liveWindow, window)
	}
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}
