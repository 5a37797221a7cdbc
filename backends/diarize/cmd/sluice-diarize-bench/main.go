// Command sluice-diarize-bench scores the diarization engine on the
// generated evaluation sets (`make bench-diarization`): DER per set (2, 3
// and 4 speakers, short and long) beside two baselines computed in the
// same run from the same VAD regions (everything one speaker; a new
// speaker for every speech region), then the real-time factor at 1, 2 and
// 4 slots with as many concurrent clients.
//
// -example FILE.wav writes one generated two-speaker recording and its
// reference (FILE.rttm) for trying the diarization endpoint (README).
//
// -split dev scores the dev split instead (evalset.DevSeed), and
// -thresholds a,b,c sweeps the clustering threshold there: that is how
// diarize.DefaultThreshold was chosen; the test split is never tuned on.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/diarize"
	"github.com/sluice-dev/sluice/backends/diarize/der"
	"github.com/sluice-dev/sluice/backends/diarize/evalset"
	"github.com/sluice-dev/sluice/backends/onnx"
)

func main() {
	split := flag.String("split", "test", "test (scored) or dev (tuning)")
	thresholds := flag.String("thresholds", "", "comma-separated BIC penalties to sweep (default: the engine's)")
	options := flag.String("options", "{}", "extra engine options (JSON)")
	slots := flag.String("slots", "1,2,4", "slot counts for the real-time factor (empty: skip)")
	sets := flag.String("sets", "", "comma-separated set names (default: all)")
	oracle := flag.Bool("oracle", false, "also score with num_speakers given")
	models := flag.String("models", "models", "models root with the espeak-en checkpoint (make models), for the mixed set's eSpeak NG voices")
	nDialogs := flag.Int("dialogs", 0, "score this many generated dialogs (evalset.Dialogs) instead of the standard sets")
	dialogSeed := flag.Uint64("dialog-seed", evalset.DialogSeed, "seed of the dialogs")
	dialogOpts := flag.String("dialog-options", "{}", "engine option sets for the dialogs, separated by ';' (each scored in the same run)")
	example := flag.String("example", "", "write one generated 30-s meeting of two flite voices to this WAV file, its reference RTTM beside it, and exit")
	flag.Parse()
	if *example != "" {
		if err := writeExample(context.Background(), *example); err != nil {
			slog.Error("example", "err", err)
			os.Exit(1)
		}
		return
	}
	if *nDialogs > 0 {
		if err := dialogs(*nDialogs, *dialogSeed, *models, strings.Split(*dialogOpts, ";"), *oracle); err != nil {
			slog.Error("bench-dialogs", "err", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*split, *thresholds, *options, *slots, *sets, *models, *oracle); err != nil {
		slog.Error("bench-diarization", "err", err)
		os.Exit(1)
	}
}

func run(split, thresholds, options, slotList, setList, models string, oracle bool) error {
	ctx := context.Background()
	seed := uint64(evalset.TestSeed)
	if split == "dev" {
		seed = evalset.DevSeed
	} else if split != "test" {
		return fmt.Errorf("split %q: test or dev", split)
	}
	model := catalogue.DefaultSources("").SileroModel()
	g, err := evalset.NewGenerator(ctx)
	if err != nil {
		return err
	}
	defer g.Close(ctx)
	if err := g.AddEspeak(ctx, filepath.Join(models, catalogue.EspeakEn)); err != nil {
		return fmt.Errorf("%w (make models builds the espeak-en checkpoint)", err)
	}
	type set struct {
		spec evalset.Spec
		recs []evalset.Recording
	}
	var all []set
	for _, sp := range evalset.Standard(seed) {
		if setList != "" && !strings.Contains(","+setList+",", ","+sp.Name+",") {
			continue
		}
		recs, err := g.Generate(ctx, sp)
		if err != nil {
			return err
		}
		all = append(all, set{sp, recs})
	}
	vad, err := onnx.OpenVAD(ctx, "", model, 1)
	if err != nil {
		return err
	}
	defer vad.Close()
	ths := []string{""}
	if thresholds != "" {
		ths = strings.Split(thresholds, ",")
	}
	eng := diarize.New(diarize.Config{})
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "split %s\tset\trecs\taudio s\tpenalty\tDER\tmiss\tFA\tconf\toracle DER\tone-speaker DER\tper-region DER\t\n", split)
	var recsAll []evalset.Recording
	for _, th := range ths {
		opts := map[string]any{}
		if err := json.Unmarshal([]byte(options), &opts); err != nil {
			return fmt.Errorf("-options: %w", err)
		}
		if th != "" {
			v, err := strconv.ParseFloat(th, 64)
			if err != nil {
				return fmt.Errorf("threshold %q: %w", th, err)
			}
			opts["penalty"] = v
		}
		ob, _ := json.Marshal(opts)
		spec := backends.Spec{Task: diarize.Task, Engine: diarize.Name, Checkpoint: model, Options: ob, Slots: 1}
		sess, _, err := eng.Open(ctx, spec)
		if err != nil {
			return err
		}
		for _, s := range all {
			var sys, orc, one, per der.Result
			secs := 0.0
			for _, r := range s.recs {
				secs += r.Seconds()
				hyp, err := diarizeOnce(ctx, sess, r, audio.DiarizationRequest{})
				if err != nil {
					return err
				}
				sys = sys.Add(der.Score(r.Ref, hyp, der.NISTCollar))
				if oracle {
					hyp, err := diarizeOnce(ctx, sess, r, audio.DiarizationRequest{NumSpeakers: s.spec.Speakers})
					if err != nil {
						return err
					}
					orc = orc.Add(der.Score(r.Ref, hyp, der.NISTCollar))
				}
				regions, err := vad.Speech(ctx, r.Samples, onnx.VADParams{Threshold: 0.5, MinSpeechMS: 250, MinSilenceMS: 100, SpeechPadMS: 30})
				if err != nil {
					return err
				}
				var allOne, each []der.Turn
				for i, rg := range regions {
					a, b := float64(rg[0])/evalset.Rate, float64(rg[1])/evalset.Rate
					allOne = append(allOne, der.Turn{Speaker: "S", Start: a, End: b})
					each = append(each, der.Turn{Speaker: fmt.Sprint(i), Start: a, End: b})
				}
				one = one.Add(der.Score(r.Ref, allOne, der.NISTCollar))
				per = per.Add(der.Score(r.Ref, each, der.NISTCollar))
			}
			orcCell := "-"
			if oracle {
				orcCell = pct(orc.DER)
			}
			fmt.Fprintf(tw, "\t%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.spec.Name, len(s.recs), secs, or(th, "default"),
				pct(sys.DER), pct(sys.Missed/sys.Scored), pct(sys.FalseAlarm/sys.Scored), pct(sys.Confusion/sys.Scored), orcCell, pct(one.DER), pct(per.DER))
			if th == ths[0] {
				recsAll = append(recsAll, s.recs...)
			}
		}
		_ = sess.Close(ctx)
	}
	tw.Flush()
	if slotList == "" {
		return nil
	}
	fmt.Println()
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "slots\trequests\taudio s\twall s\tx real time (all slots)\tmean RTF per request\t\n")
	for _, f := range strings.Split(slotList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 16 {
			return fmt.Errorf("bad slot count %q", f)
		}
		if err := rtf(ctx, eng, model, n, recsAll, tw); err != nil {
			return err
		}
	}
	return tw.Flush()
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func diarizeOnce(ctx context.Context, s backends.Session, r evalset.Recording, q audio.DiarizationRequest) ([]der.Turn, error) {
	in, _ := json.Marshal(q)
	o, err := s.Infer(ctx, backends.Request{ID: r.Name, Input: in, Data: r.WAV()}, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.Name, err)
	}
	var res audio.DiarizationResult
	if err := json.Unmarshal(o.JSON, &res); err != nil {
		return nil, err
	}
	var out []der.Turn
	for _, seg := range res.Segments {
		out = append(out, der.Turn{Speaker: seg.Speaker, Start: seg.Start, End: seg.End})
	}
	return out, nil
}

// rtf answers every recording once from a pool of n slots with n clients.
func rtf(ctx context.Context, eng *diarize.Engine, model string, n int, recs []evalset.Recording, tw *tabwriter.Writer) error {
	spec := backends.Spec{Task: diarize.Task, Engine: diarize.Name, Checkpoint: model, Options: []byte("{}"), Slots: n}
	primary, _, err := eng.Open(ctx, spec)
	if err != nil {
		return err
	}
	sessions := []backends.Session{primary}
	for i := 1; i < n; i++ {
		s, err := primary.Clone(ctx, i)
		if err != nil {
			return err
		}
		sessions = append(sessions, s)
	}
	defer func() {
		for _, s := range sessions {
			_ = s.Close(ctx)
		}
	}()
	wavs := make([][]byte, len(recs))
	audioSecs := 0.0
	for i, r := range recs {
		wavs[i] = r.WAV()
		audioSecs += r.Seconds()
	}
	queue := make(chan int, len(recs))
	for i := range recs {
		queue <- i
	}
	close(queue)
	var mu sync.Mutex
	var firstErr error
	rtfSum := 0.0
	start := time.Now()
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() {
			for i := range queue {
				t0 := time.Now()
				_, err := s.Infer(ctx, backends.Request{ID: recs[i].Name, Data: wavs[i]}, nil)
				el := time.Since(t0).Seconds()
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				rtfSum += el / recs[i].Seconds()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wall := time.Since(start).Seconds()
	if firstErr != nil {
		return firstErr
	}
	fmt.Fprintf(tw, "%d\t%d\t%.0f\t%.1f\t%.1f\t%.4f\t\n", n, len(recs), audioSecs, wall, audioSecs/wall, rtfSum/float64(len(recs)))
	return nil
}
