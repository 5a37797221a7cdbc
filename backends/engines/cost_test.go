package engines

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// overLimit returns, for a task, a request over its cost bound and the
// field the refusal must name: TTS text one character past
// audio.MaxTextLen ("input"); for audio, a WAV whose header states two
// hours (over every max_seconds, 3600 at most) though it carries one
// second: refused from the header, so before any decoding ("file").
func overLimit(task string) (backends.Request, string) {
	if task == "tts" {
		in, _ := json.Marshal(audio.TTSRequest{Text: strings.Repeat("a", audio.MaxTextLen) + "."})
		return backends.Request{ID: "over", Input: in}, "input"
	}
	wav := audio.WAV(16000, make([]int16, 16000))
	binary.LittleEndian.PutUint32(wav[len(wav)-32000-4:], 2*3600*16000*2) // the data chunk's size
	return backends.Request{ID: "over", Data: wav}, "file"
}

// TestCostRefusedBeforeWork (contract engine.cost-bound): every checkpoint
// of the default root refuses a request over its cost bound (text length,
// stated duration) with ErrInvalid naming the field, a 400 with `param`,
// and its session then answers a standard request.
func TestCostRefusedBeforeWork(t *testing.T) {
	cat, reg := scan(t)
	in := standardInputs(t)
	ctx := context.Background()
	for _, name := range cat.Names() {
		cp, _ := cat.Get(name)
		t.Run(name, func(t *testing.T) {
			s, _, err := reg[cp.Engine].Open(ctx, SpecFor(name, cp, 1))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			req, param := overLimit(cp.Task)
			_, err = s.Infer(ctx, req, nil)
			if !errors.Is(err, backends.ErrInvalid) || backends.ParamOf(err) != param {
				t.Fatalf("over the bound: %v (param %q), want invalid naming %q", err, backends.ParamOf(err), param)
			}
			if _, err := s.Infer(ctx, in[cp.Task][0], nil); err != nil {
				t.Fatalf("after the refusal: %v", err)
			}
		})
	}
}
