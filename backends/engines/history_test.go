package engines

import (
	"context"
	"testing"
)

// TestHistoryIndependence is the short form of the contract's
// history-independence check (E1) in the default test run (ShortHistory):
// every checkpoint of the default root answers each request like a fresh
// pool does, through two seeded shuffled orders with the other requests
// interleaved, at 1, 2 and 4 slots (a checkpoint refuses what it does not
// admit). `make validate-engines` runs the long form (six orders, fresh
// references everywhere, jfk.wav, whisper). On main it failed for eSpeak
// NG: "Sure, I will open it after the news." came out another length after
// HistoryPair[0] (espeak-en 18/22 equal at 1 slot).
func TestHistoryIndependence(t *testing.T) {
	cat, reg := scan(t)
	rows, err := ShortHistory(context.Background(), cat, reg, standardInputs(t))
	for _, r := range rows {
		t.Logf("%s slots=%d orders=%d equal %d/%d %s %v", r.Checkpoint, r.Slots, r.Orders, r.Matched, r.Requests, r.Status(), r.Differs)
	}
	if err != nil {
		t.Fatal(err)
	}
}
