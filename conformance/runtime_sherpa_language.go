package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/sherpa"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// checkSherpaLanguage (sherpa.language): the recognizers whose language
// is fixed per library object (SenseVoice, multilingual Whisper, Canary)
// take any language they declare per request: at 2 slots, two concurrent
// callers sending the same requests in more languages than a slot keeps
// recognizers for, in different orders, get byte for byte what one slot
// answers; a language the model does not declare is refused as invalid,
// naming language.
func checkSherpaLanguage(ctx context.Context, rr *runtimeRun) error {
	langs := []struct {
		name    string
		langs   []string
		unknown string
	}{
		{sherpa.SenseVoiceSynthetic, []string{"", "en", "zh", "ja", "ko", "yue"}, "fr"},
		{sherpa.WhisperMultiSynthetic, []string{"", "en", "de", "es", "fr"}, "zh"},
		{sherpa.CanarySynthetic, []string{"", "es", "de", "fr", "en"}, "ja"},
	}
	var names []string
	for _, l := range langs {
		names = append(names, l.name)
	}
	speech, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		speech = tone(4, 4)
	}
	rt, root, done, err := sherpaRuntime(rr, names, nil)
	if err != nil {
		return err
	}
	defer done()
	var errs []error
	for _, f := range langs {
		one, two := f.name+"1."+rr.tag, f.name+"2."+rr.tag
		if _, err := rt.Apply(ctx, one, sherpaSpec(root, f.name, "asr", 1)); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		if _, err := rt.Apply(ctx, two, sherpaSpec(root, f.name, "asr", 2)); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		reqs := make([]backends.Request, len(f.langs))
		want := make([][]byte, len(f.langs))
		distinct := map[string]bool{}
		for i, l := range f.langs {
			in, _ := json.Marshal(map[string]string{"language": l})
			reqs[i] = backends.Request{Data: speech, Input: in}
			res, err := rt.Infer(ctx, one, reqs[i], runtime.InferOptions{})
			if err != nil {
				return fmt.Errorf("%s language %q: %w", f.name, l, err)
			}
			want[i] = append(res.Output.JSON, res.Output.Data...)
			var r struct{ Text string }
			_ = json.Unmarshal(res.Output.JSON, &r)
			distinct[r.Text] = true
		}
		if len(distinct) < 3 {
			errs = append(errs, fmt.Errorf("%s: %d languages gave %d distinct transcripts: the language does not reach the model", f.name, len(f.langs), len(distinct)))
		}
		errs = append(errs, twoCallers(ctx, rt, two, f.name, reqs, want, 1)...)
		in, _ := json.Marshal(map[string]string{"language": f.unknown})
		_, err := rt.Infer(ctx, two, backends.Request{Data: speech, Input: in}, runtime.InferOptions{})
		if runtime.CodeOf(err) != core.CodeInvalid || !strings.Contains(err.Error(), "language") || backends.ParamOf(err) != "language" {
			errs = append(errs, fmt.Errorf("%s: language %q: %v (code %v), want invalid naming language", f.name, f.unknown, err, runtime.CodeOf(err)))
		}
	}
	return errors.Join(errs...)
}
