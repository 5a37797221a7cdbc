package sherpa

// Cancellation (CONTRACT.md sherpa.cancel): the binding checks a
// request's context at every point it controls: in the TTS progress
// callback (gen.go) before and after each piece, between a streaming
// recognizer's chunks (online.go), and before an offline decode or a
// diarization (asr.go, diarize.go), whose one library call cannot be
// interrupted.

// testHook, set only by tests, is called at the points where a request's
// context is checked around a native call that cannot be interrupted
// ("offline-decode", "online-decode", "online-decoded", "diarize"): a
// test cancels there and counts what runs after.
var testHook func(point string)

func hook(point string) {
	if testHook != nil {
		testHook(point)
	}
}
