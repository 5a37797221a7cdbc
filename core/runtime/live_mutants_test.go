//go:build sluice_mutants

package runtime

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/sluice-dev/sluice/core"
)

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The live checks have teeth: with a planted core bug that lets a request
// barge past a waiting manager (core.MutBarge), the sampled check counts
// the NoBarging violation and logs it once, with the events before it as
// trace records, and the runtime goes on serving.
func TestLiveInvariantsCatchMutant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		e := newEnv(t, core.Options{Mutants: core.MutBarge}, withoutChecks(), withLive(1), func(c *envConfig) {
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		})
		e.apply("a", spec(2, `{}`))
		running := e.infer(bg, "a", `{"gate":"g"}`, InferOptions{})
		synctest.Wait()
		unload := start(func() (core.ModelStatus, error) { return e.rt.Unload(bg, "a") })
		synctest.Wait()
		barged := e.infer(bg, "a", `{}`, InferOptions{}) // takes the spare slot past the unload
		if _, err := barged.wait(); err != nil {
			t.Fatal(err)
		}
		e.fx.Gates().Open("g")
		if _, err := running.wait(); err != nil {
			t.Fatal(err)
		}
		if _, err := unload.wait(); err != nil {
			t.Fatal(err)
		}
		if n := e.rt.InvariantViolations(); n == 0 {
			t.Fatal("no violation counted")
		}
		out := logs.String()
		if strings.Count(out, "core invariant broken") != 1 || !strings.Contains(out, "NoBarging") ||
			!strings.Contains(out, `\"ev\":\"SubmitManager\"`) || !strings.Contains(out, "model=a") {
			t.Fatalf("log:\n%s", out)
		}
	})
}
