package pocketsphinx

import (
	"context"
	"errors"
	"fmt"
	"github.com/sluice-dev/sluice/backends/internal/native"
	"os"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

// TestCancelStopsBetweenPieces: a request whose context ends while it is
// decoded stops at the next piece (CONTRACT.md E3) with the context's
// error, and the session then answers the next request like a fresh one.
// On main the upload was decoded in one native call, so the decode ran to
// its end whatever the context did.
func TestCancelStopsBetweenPieces(t *testing.T) {
	dir := checkpoint(t)
	wav := speak(t, "Turn on the kitchen lights. Set a timer for ten minutes. Open the garage door.")
	s, _, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	want := transcribe(t, s, wav)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pieces := 0
	afterPiece = func(n int) {
		pieces = n
		if n == 2 {
			cancel()
		}
	}
	_, err = s.Infer(ctx, backends.Request{Data: wav}, nil)
	afterPiece = nil
	if !errors.Is(err, context.Canceled) || pieces != 2 {
		t.Fatalf("cancelled after piece 2: err %v after %d pieces", err, pieces)
	}
	if got := transcribe(t, s, wav); got.Text != want.Text {
		t.Fatalf("after a cancelled request %q, fresh %q", got.Text, want.Text)
	}
}

// TestCostBudgetStopsDecode: a decode whose CPU time passes its budget
// stops with ErrCostBudget (E2) after its first piece and the session
// stays usable. The budget here is tiny (no floor, 1 µs per audio
// second); the default is 2 x 1.0 CPU-s per audio second plus 5 s.
func TestCostBudgetStopsDecode(t *testing.T) {
	dir := checkpoint(t)
	wav := speak(t, "Turn on the kitchen lights. Set a timer for ten minutes.")
	sp := spec(dir, 1)
	sp.Options = []byte(`{"cost_per_second":0.000001,"cost_factor":1}`)
	s, _, err := New().Open(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	floor := costFloor
	costFloor = 0
	defer func() { costFloor = floor }()
	pieces := 0
	afterPiece = func(n int) { pieces = n }
	defer func() { afterPiece = nil }()
	_, err = s.Infer(context.Background(), backends.Request{Data: wav}, nil)
	if !errors.Is(err, ErrCostBudget) || !errors.Is(err, backends.ErrInvalid) || backends.ParamOf(err) != "file" || pieces != 1 {
		t.Fatalf("err %v after %d pieces, want ErrCostBudget after 1", err, pieces)
	}
	costFloor = floor
	if r := transcribe(t, s, wav); r.Text == "" {
		t.Fatal("no transcript after a stopped decode")
	}
}

// TestCostOptionsBounded: cost options outside their ranges are refused
// before anything loads.
func TestCostOptionsBounded(t *testing.T) {
	dir := checkpoint(t)
	for _, o := range []string{`{"cost_per_second":-1}`, `{"cost_factor":0.5}`, `{"cost_per_second":1e9}`} {
		sp := spec(dir, 1)
		sp.Options = []byte(o)
		if err := New().Validate(sp); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: %v", o, err)
		}
	}
}

// TestCMNFound: the default checkpoint's decoder exposes its CMN at the
// offsets cmn.go knows, so uploads are decoded in pieces (a layout it does
// not know would fall back to whole decodes, without cancellation between
// pieces).
func TestCMNFound(t *testing.T) {
	dir := checkpoint(t)
	s, _, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if s.(*session).cmn.cmn == nil {
		t.Fatal("the decoder's cmn_t was not found: uploads decode whole")
	}
}

// TestAnswersIndependentOfPathBefore: a short request (one whole decode)
// and a long one (pieces) give the same answers whatever the session
// decoded before, by either path (E1).
func TestAnswersIndependentOfPathBefore(t *testing.T) {
	dir := checkpoint(t)
	jfk, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		native.SkipUnavailable(t, err) // make deps installs it; SLUICE_REQUIRE_ENGINES makes its absence a failure
	}
	short := speak(t, "Turn on the kitchen lights.")
	s, _, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	a := transcribe(t, s, short)
	b := transcribe(t, s, jfk)
	a2 := transcribe(t, s, short)
	b2 := transcribe(t, s, jfk)
	if fmt.Sprint(a) != fmt.Sprint(a2) || fmt.Sprint(b) != fmt.Sprint(b2) {
		t.Fatalf("short %v then %v; long %v then %v", a, a2, b, b2)
	}
}
