package backends

import "strings"

// StockVoices are OpenAI's voice names, as its SDK lists them. A speech
// model takes each as its default voice unless its spec's voice map maps
// it to one of its voices (core/runtime's ModelSpec.VoiceMap), so an app
// written for OpenAI runs unchanged.
var StockVoices = []string{"alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse", "marin", "cedar"}

// StockVoice returns the stock name v is, in any case, and whether it is
// one.
func StockVoice(v string) (string, bool) {
	for _, s := range StockVoices {
		if strings.EqualFold(v, s) {
			return s, true
		}
	}
	return "", false
}
