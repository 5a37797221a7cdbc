// Command sluice-validate-engines runs the contract's matched-output check
// on every checkpoint of a models root (`make validate-engines`): each
// checkpoint answers the standard requests at capacity 1, then from fresh
// pools of 1, 2 and 4 slots with as many concurrent clients, and the table
// counts the outputs byte-identical to the capacity-1 answers. A slot count
// the engine refuses (espeak beyond one slot) is shown as refused. The
// whisper engine is checked with its synthetic model (engines.WhisperMatched).
//
// A second table is the history-independence check (contract E1,
// engines.History): every request answered by a fresh one-slot pool is the
// reference; fresh pools of each slot count then serve -orders seeded
// shuffles of all requests (with the longer and differently-optioned TTS
// requests of engines.HistoryInputs interleaved) and every answer must
// equal its reference. The exit status is 1 on any mismatch or error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
)

func main() {
	root := flag.String("models", "models", "models root (built by `make models`)")
	slots := flag.String("slots", "1,2,4", "slot counts to check")
	rounds := flag.Int("rounds", 2, "times each pool answers every request")
	npm := flag.String("npm", "", "npm prefix (for jfk.wav; default $SLUICE_NPM_PREFIX or <module>/.deps/npm)")
	orders := flag.Int("orders", 6, "seeded shuffled orders each pool of the history check serves (0: skip the check)")
	seed := flag.Uint64("seed", 32, "seed of the history check's shuffles")
	flag.Parse()
	if err := run(*root, *slots, *rounds, *npm, *orders, *seed); err != nil {
		slog.Error("validate-engines", "err", err)
		os.Exit(1)
	}
}

func run(root, slotList string, rounds int, npm string, orders int, seed uint64) error {
	var counts []int
	for _, f := range strings.Split(slotList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > catalogue.MaxSlots {
			return fmt.Errorf("bad slot count %q", f)
		}
		counts = append(counts, n)
	}
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
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "checkpoint\tengine\ttask\tslots\tmatched\tstatus")
	bad := 0
	total, matched := 0, 0
	report := func(name, engine, task string, maxSlots int, rows []engines.Row) {
		for _, r := range rows {
			cell := fmt.Sprintf("%d/%d", r.Matched, r.Requests)
			status := r.Status()
			switch {
			case r.Refused != nil:
				cell = "-"
				status = fmt.Sprintf("refused (checkpoint admits %d)", maxSlots)
				if r.Slots <= maxSlots {
					bad++
					status = "UNEXPECTED REFUSAL: " + r.Refused.Error()
				}
			case r.Err != nil:
				bad++
				status = "error: " + r.Err.Error()
			case status != "ok":
				bad++
			}
			total += r.Requests
			matched += r.Matched
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", name, engine, task, r.Slots, cell, status)
		}
	}
	for _, name := range cat.Names() {
		cp, _ := cat.Get(name)
		eng, _ := reg.Get(cp.Engine)
		rows, err := engines.Matched(ctx, eng, engines.SpecFor(name, cp, 1), name, inputs[cp.Task], counts, rounds)
		if err != nil {
			return err
		}
		report(name, cp.Engine, cp.Task, cp.Parallel.MaxSlots, rows)
	}
	// whisper: the synthetic model, built beside the root (WhisperMatched).
	rows, err := engines.WhisperMatched(ctx, inputs["asr"], counts, rounds)
	if err != nil {
		return err
	}
	report(engines.WhisperCheckpoint, "whisper", "asr", catalogue.MaxSlots, rows)
	tw.Flush()
	fmt.Printf("\n%d of %d responses matched the capacity-1 answers\n", matched, total)
	if bad > 0 {
		return errors.New("matched-output check failed")
	}
	if orders < 1 {
		return nil
	}
	return history(ctx, cat, reg, inputs, engines.HistoryOptions{Slots: counts, Orders: orders, Seed: seed, Fresh: true})
}

// history prints the history-independence table (contract E1).
func history(ctx context.Context, cat *catalogue.Catalogue, reg backends.Registry, inputs map[string][]backends.Request, o engines.HistoryOptions) error {
	fmt.Printf("\nhistory independence: %d seeded shuffled orders per pool (seed %d), each answer against the request's answer from a fresh pool\n", o.Orders, o.Seed)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "checkpoint\tengine\ttask\tslots\tequal\tstatus")
	bad := 0
	report := func(name, engine, task string, maxSlots int, rows []engines.HistoryRow) {
		for _, r := range rows {
			cell, status := fmt.Sprintf("%d/%d", r.Matched, r.Requests), r.Status()
			switch {
			case r.Refused != nil:
				cell, status = "-", fmt.Sprintf("refused (checkpoint admits %d)", maxSlots)
				if r.Slots <= maxSlots {
					bad++
					status = "UNEXPECTED REFUSAL: " + r.Refused.Error()
				}
			case r.Err != nil:
				bad++
				status = "error: " + r.Err.Error()
			case status != "ok":
				bad++
				status += " " + strings.Join(r.Differs, " ")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", name, engine, task, r.Slots, cell, status)
		}
	}
	for _, name := range cat.Names() {
		cp, _ := cat.Get(name)
		eng, _ := reg.Get(cp.Engine)
		rows, err := engines.History(ctx, eng, engines.SpecFor(name, cp, 1), name, engines.HistoryInputs(inputs, cp.Task), o)
		if err != nil {
			return err
		}
		report(name, cp.Engine, cp.Task, cp.Parallel.MaxSlots, rows)
	}
	rows, err := engines.WhisperHistory(ctx, inputs["asr"], o)
	if err != nil {
		return err
	}
	report(engines.WhisperCheckpoint, "whisper", "asr", catalogue.MaxSlots, rows)
	tw.Flush()
	if bad > 0 {
		return errors.New("history-independence check failed")
	}
	return nil
}
