package onnx

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/backends"
)

// TestSessionSettingsKeepOutputs: the session settings (spinning, a shared
// pre-packed weights container, no CPU arena) change how ONNX Runtime runs,
// never what it answers; a pool sharing one container keeps answering
// after its primary closed (the clones hold the container).
func TestSessionSettingsKeepOutputs(t *testing.T) {
	dir := checkpoint(t)
	in := jfk(t)
	ctx := context.Background()
	want, err := open(t, dir).Infer(ctx, backends.Request{Data: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []string{`{"allow_spinning":true,"intra_op_threads":2}`, `{"share_prepacked_weights":true}`,
		`{"disable_cpu_arena":true}`, `{"share_prepacked_weights":true,"disable_cpu_arena":true}`} {
		primary, _, err := New(Config{}).Open(ctx, spec(dir, 2, opts))
		if err != nil {
			t.Fatalf("%s: %v", opts, err)
		}
		clone, err := primary.Clone(ctx, 1)
		if err != nil {
			t.Fatalf("%s: %v", opts, err)
		}
		for i, s := range []backends.Session{primary, clone} {
			got, err := s.Infer(ctx, backends.Request{Data: in}, nil)
			if err != nil || string(got.JSON) != string(want.JSON) {
				t.Fatalf("%s, session %d: %s (%v), want %s", opts, i, got.JSON, err, want.JSON)
			}
		}
		primary.Close(ctx)
		if got, err := clone.Infer(ctx, backends.Request{Data: in}, nil); err != nil || string(got.JSON) != string(want.JSON) {
			t.Fatalf("%s, clone after the primary closed: %s (%v)", opts, got.JSON, err)
		}
		clone.Close(ctx)
	}
	if err := New(Config{}).Validate(spec(dir, 1, `{"share_prepacked_weights":"yes"}`)); err == nil {
		t.Fatal("a non-boolean share_prepacked_weights was accepted")
	}
}
