package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/sherpa"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// checkSherpaHotwords (sherpa.hotwords): a transducer registered with
// modified_beam_search takes a request's hotwords, split by its modeling
// unit (cjkchar for the character model, bpe for the one with a
// bpe.vocab): the transcript changes, and at 2 slots two concurrent
// callers sending requests with and without hotwords in different orders
// get byte for byte what one slot answers. A phrase the model's pieces
// cannot spell, and hotwords to a model decoding with greedy search, are
// refused as invalid naming hotwords.
func checkSherpaHotwords(ctx context.Context, rr *runtimeRun) error {
	models := []struct {
		name, hot, bad string
	}{
		{sherpa.TransducerSynthetic, "j :40/l :40", "the"},              // "the" is one cjkchar piece, not a token
		{sherpa.TransducerBPESynthetic, "one :40/and :40", "caf\u00e9"}, // é is no piece of bpe.vocab
		{sherpa.StreamingBPESynthetic, "one :40/and :40", "x-ray"},
	}
	speech, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		speech = tone(4, 4)
	}
	var names []string
	for _, m := range models {
		names = append(names, m.name)
	}
	rt, root, done, err := sherpaRuntime(rr, names, nil)
	if err != nil {
		return err
	}
	defer done()
	spec := func(name string, slots int, opts string) runtime.ModelSpec {
		return runtime.ModelSpec{Engine: sherpa.Name, Task: "asr", Slots: slots, Checkpoint: filepath.Join(root, name), Options: []byte(opts)}
	}
	const beam = `{"oversubscribe":true,"decoding_method":"modified_beam_search"}`
	input := func(hw string) []byte { b, _ := json.Marshal(map[string]string{"hotwords": hw}); return b }
	var errs []error
	for _, m := range models {
		one, two, greedy := m.name+"1."+rr.tag, m.name+"2."+rr.tag, m.name+"g."+rr.tag
		for id, s := range map[string]runtime.ModelSpec{one: spec(m.name, 1, beam), two: spec(m.name, 2, beam), greedy: spec(m.name, 1, `{"oversubscribe":true}`)} {
			if _, err := rt.Apply(ctx, id, s); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
		}
		reqs := []backends.Request{{Data: speech}, {Data: speech, Input: input(m.hot)}, {Data: tone(2, 4), Input: input(m.hot)}}
		want := make([][]byte, len(reqs))
		for i, r := range reqs {
			res, err := rt.Infer(ctx, one, r, runtime.InferOptions{})
			if err != nil {
				return fmt.Errorf("%s request %d: %w", m.name, i, err)
			}
			want[i] = append(res.Output.JSON, res.Output.Data...)
		}
		if bytes.Equal(want[0], want[1]) {
			errs = append(errs, fmt.Errorf("%s: hotwords %q did not change the transcript: they do not reach the decoder", m.name, m.hot))
		}
		errs = append(errs, twoCallers(ctx, rt, two, m.name, reqs, want, 2)...)
		for id, hw := range map[string]string{two: m.bad, greedy: m.hot} {
			_, err := rt.Infer(ctx, id, backends.Request{Data: speech, Input: input(hw)}, runtime.InferOptions{})
			if runtime.CodeOf(err) != core.CodeInvalid || backends.ParamOf(err) != "hotwords" {
				errs = append(errs, fmt.Errorf("%s: hotwords %q: %v (code %v), want invalid naming hotwords", id, hw, err, runtime.CodeOf(err)))
			}
		}
	}
	return errors.Join(errs...)
}
