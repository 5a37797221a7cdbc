package engines

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/flite"
	"github.com/sluice-dev/sluice/backends/internal/speech"
)

// Commands are the short spoken commands of the checks: flite speaks them
// for the TTS rows, and their audio feeds the ASR and VAD rows.
var Commands = speech.Commands()

// Inputs returns the standard requests for each task: TTS requests for
// Commands and one streamed request; for ASR and VAD, flite's audio of Commands (VAD with a second
// of silence around it) plus jfk.wav from the npm prefix when present.
func Inputs(ctx context.Context, src catalogue.Sources) (map[string][]backends.Request, error) {
	out := map[string][]backends.Request{}
	for _, c := range Commands {
		in, _ := json.Marshal(audio.TTSRequest{Text: c})
		out["tts"] = append(out["tts"], backends.Request{ID: fmt.Sprintf("tts-%d", len(out["tts"])), Input: in})
	}
	fs, _, err := flite.New().Open(ctx, backends.Spec{Task: "tts", Checkpoint: "slt", Slots: 1})
	if err != nil {
		return nil, fmt.Errorf("inputs need flite to speak the commands: %w", err)
	}
	defer fs.Close(ctx)
	for i, req := range out["tts"] {
		o, err := fs.Infer(ctx, req, nil)
		if err != nil {
			return nil, err
		}
		a, err := audio.ParseWAV(o.Data)
		if err != nil {
			return nil, err
		}
		out["asr"] = append(out["asr"], backends.Request{ID: fmt.Sprintf("asr-%d", i), Data: o.Data})
		silence := make([]int16, a.Rate)
		padded := append(append(append([]int16(nil), silence...), a.Samples...), silence...)
		out["vad"] = append(out["vad"], backends.Request{ID: fmt.Sprintf("vad-%d", i), Data: audio.WAV(a.Rate, padded)})
	}
	// The speech route streams wav and pcm from the engine's chunks
	// (server/internal/openai pcmSpeech): a streamed request, resampled,
	// whose chunks are compared as a whole answer is (Infer).
	in, _ := json.Marshal(audio.TTSRequest{Text: Commands[0] + " " + Commands[1], Format: "pcm", SampleRate: 48000})
	out["tts"] = append(out["tts"], backends.Request{ID: fmt.Sprintf("tts-%d-stream", len(out["tts"])), Input: in, Stream: true})
	if err := diarizationInputs(ctx, out); err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(src.JFK()); err == nil {
		out["asr"] = append(out["asr"], backends.Request{ID: "asr-jfk", Data: b})
		out["vad"] = append(out["vad"], backends.Request{ID: "vad-jfk", Data: b})
	}
	return out, nil
}
