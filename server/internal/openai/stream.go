package openai

import (
	"bytes"
	"encoding/json"
)

// transcriptDone reports whether ev, one event of the transcription
// stream (TranscriptEvents), is its transcript.text.done: the stream's
// closing event, which StreamEvents holds until the engine returned and
// sends with [DONE], the lease released before its last byte, so that a
// client that sends its next request as soon as it has the transcript
// never finds this one's lease (CONTRACT.md phase.stream-deferred).
func transcriptDone(ev []byte) bool {
	if !bytes.Contains(ev, []byte(`"transcript.text.done"`)) {
		return false // a delta: no decode on the stream's hot path
	}
	var e struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(ev, &e) == nil && e.Type == "transcript.text.done"
}
