package engines

import (
	"context"
	"testing"
)

// TestCancelMidWork (contract engine.cancel): every checkpoint of the
// default root checks its context throughout a long request (20 s of
// audio, 1,500 characters of text), a request whose context ends at the
// middle check ends with the context's error, not an answer, and the
// session's next answer equals its answer before (ShortCancel).
func TestCancelMidWork(t *testing.T) {
	cat, reg := scan(t)
	rows, err := ShortCancel(context.Background(), cat, reg, standardInputs(t))
	for _, r := range rows {
		t.Logf("%s: %d context checks, cancelled at %d", r.Checkpoint, r.Checks, r.CutAt)
	}
	if err != nil {
		t.Fatal(err)
	}
}
