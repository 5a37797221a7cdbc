// Command sluice-soak-engines is the bounded-native-memory check of the
// engine contract (CONTRACT.md engine.native-memory, `make soak-engines`): for each
// checkpoint of a models root (and whisper's synthetic model), one engine
// at a time, it runs -cycles load/unload cycles (open a one-slot pool,
// answer one standard request, close it) and prints the process's resident
// set after -early cycles and after the last, and their ratio, which must
// be at most -max-ratio. The exit status is 1 when a ratio is over it.
// All engines share one process, as they share a server's; the
// conformance case runs a shorter churn in a child (engines.ShortChurn,
// -child here).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/whisper"
)

func main() {
	root := flag.String("models", "models", "models root (built by `make models`)")
	npm := flag.String("npm", "", "npm prefix (for jfk.wav)")
	cycles := flag.Int("cycles", 200, "load/unload cycles per engine")
	early := flag.Int("early", 10, "cycles after which the first RSS is taken")
	maxRatio := flag.Float64("max-ratio", 1.2, "largest allowed RSS(cycles)/RSS(early)")
	only := flag.String("only", "", "comma-separated checkpoints to soak (default: all, then whisper)")
	child := flag.Bool("child", false, "churn in a child process, as the conformance case does (engine.native-memory): its resident set holds the churn alone, not this process's inputs")
	flag.Parse()
	if err := run(*root, *npm, *cycles, *early, *maxRatio, *only, *child); err != nil {
		slog.Error("soak-engines", "err", err)
		os.Exit(1)
	}
}

func run(root, npm string, cycles, early int, maxRatio float64, only string, child bool) error {
	ctx := context.Background()
	reg := engines.Registry(engines.Config{})
	cat, err := engines.ScanRoot(root, reg)
	if err != nil {
		return fmt.Errorf("%w (run `make models`)", err)
	}
	inputs, err := engines.Inputs(ctx, catalogue.DefaultSources(npm))
	if err != nil {
		return err
	}
	type target struct {
		name string
		eng  backends.Engine
		spec backends.Spec
		req  backends.Request
	}
	var ts []target
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	for _, name := range cat.Names() {
		cp, _ := cat.Get(name)
		if len(want) > 0 && !want[name] {
			continue
		}
		ts = append(ts, target{name, reg[cp.Engine], engines.SpecFor(name, cp, 1), inputs[cp.Task][0]})
	}
	if len(want) == 0 || want[engines.WhisperCheckpoint] {
		spec, done, err := engines.WhisperSpec()
		if err != nil {
			return err
		}
		defer done()
		ts = append(ts, target{engines.WhisperCheckpoint, whisper.New(), spec, inputs["asr"][0]})
	}
	fmt.Printf("%-24s %10s %12s %12s %7s\n", "checkpoint", "cycles", fmt.Sprintf("rss@%d MB", early), fmt.Sprintf("rss@%d MB", cycles), "ratio")
	var rows []engines.ChurnRow
	if child {
		job := engines.ChurnJob{Early: early, Cycles: cycles}
		for _, t := range ts {
			job.Targets = append(job.Targets, engines.ChurnTarget{Checkpoint: t.name, Spec: t.spec, Input: t.req.Input, Data: t.req.Data})
		}
		var err error
		if rows, err = engines.ChurnInChild(ctx, job); err != nil {
			return err
		}
	} else {
		for _, t := range ts {
			row, err := engines.Churn(ctx, t.name, t.eng, t.spec, t.req, early, cycles)
			if err != nil {
				return err
			}
			rows = append(rows, row)
		}
	}
	bad := 0
	for _, row := range rows {
		flag := ""
		if row.Ratio() > maxRatio {
			bad++
			flag = " OVER"
		}
		fmt.Printf("%-24s %10d %12.0f %12.0f %7.2f%s\n", row.Checkpoint, cycles, row.EarlyMB, row.LastMB, row.Ratio(), flag)
	}
	if bad > 0 {
		return fmt.Errorf("%d engine(s) grew more than %.2fx", bad, maxRatio)
	}
	return nil
}
