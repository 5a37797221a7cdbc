package diarize

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/diarize/der"
	"github.com/sluice-dev/sluice/backends/diarize/evalset"
)

// testDialogs is the default test run's share of `make bench-dialogs`:
// the first dialogs of evalset.DialogSeed, the same recordings as the
// bench's first ones.
const testDialogs = 24

// TestDialogs: the diarizer on generated dialogs (1-4 speakers, 10-60 s
// of one-sentence turns with overlaps, short and long silences and levels
// 12 dB apart; flite's and eSpeak NG's voices). The engine contract's diarization target holds
// for two-speaker dialogs: the count right in at least 95% and DER p90 at
// most 10%. Over all counts the count does not reach 95% (three and four
// voices are undercounted when one speaks little or two are alike: see
// `make bench-dialogs`), so the test keeps today's level from slipping:
// these 24 had the count right in 22 (91.7%) and a DER p90 of 0.8% with
// log F0 beside the cepstra; the floor is 90% and 5%. `make bench-dialogs`
// scores 200.
func TestDialogs(t *testing.T) {
	ctx := context.Background()
	g, err := evalset.NewGenerator(ctx)
	if err != nil {
		t.Fatalf("flite (make deps): %v", err)
	}
	defer g.Close(ctx)
	root := t.TempDir()
	r, err := catalogue.DefaultRecipe(catalogue.DefaultSources(""), catalogue.EspeakEn)
	if err != nil {
		t.Fatalf("espeak-en (make deps): %v", err)
	}
	if _, err := catalogue.Build(root, []catalogue.Recipe{r}); err != nil {
		t.Fatal(err)
	}
	if err := g.AddEspeak(ctx, filepath.Join(root, catalogue.EspeakEn)); err != nil {
		t.Fatal(err)
	}
	ds, err := g.Dialogs(ctx, evalset.DialogSeed, testDialogs)
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := New(Config{}).Open(ctx, spec(t, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	sc, err := evalset.ScoreDialogs(ctx, ds, func(_ context.Context, d evalset.Dialog) ([]der.Turn, error) {
		hyp, _ := diarizeRec(t, s, d.Recording, audio.DiarizationRequest{})
		return hyp, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	two := sc.Only(2)
	t.Logf("%s; two speakers: %s", sc, two)
	if two.N < 8 || two.Accuracy() < 0.95 || two.Percentile(0.9) > 0.10 {
		t.Errorf("two-speaker dialogs: %s", two)
	}
	if sc.Accuracy() < 0.90 || sc.Percentile(0.9) > 0.05 {
		t.Errorf("all dialogs: %s; wrong counts: %v", sc, sc.Wrong)
	}
}
