package engines

import (
	"encoding/binary"
	"encoding/json"
	"strings"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// OverLimit returns, for a task, a request over its cost bound and the
// field the refusal must name: TTS text one character past
// audio.MaxTextLen ("input"); for audio, a WAV whose header states two
// hours (over every max_seconds, 3600 at most) though it carries one
// second: refused from the header, so before any decoding ("file").
func OverLimit(task string) (backends.Request, string) {
	if task == "tts" {
		in, _ := json.Marshal(audio.TTSRequest{Text: strings.Repeat("a", audio.MaxTextLen) + "."})
		return backends.Request{ID: "over", Input: in}, "input"
	}
	wav := audio.WAV(16000, make([]int16, 16000))
	binary.LittleEndian.PutUint32(wav[len(wav)-32000-4:], 2*3600*16000*2) // the data chunk's size
	return backends.Request{ID: "over", Data: wav}, "file"
}
