package sim

import (
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/core"
)

// CampaignOptions configures a run of many seeds.
type CampaignOptions struct {
	// First is the first seed; seeds First..First+Seeds-1 run.
	First uint64
	Seeds int
	// Workers is the number of seeds run at once (GOMAXPROCS when 0).
	Workers int
	// Base is the options of every run; its Seed, Trace and Timeline are
	// ignored.
	Base Options
	// StopAtFirst stops after the lowest failing seed: every seed below it
	// still runs, none above it is started.
	StopAtFirst bool

	_ struct{}
}

// CampaignResult is what a campaign found, in seed order.
type CampaignResult struct {
	Runs        int
	Events      int64
	VirtualTime int64
	Admissions  int64
	Rejections  map[string]int64
	WaitP50     int64
	WaitP99     int64
	Failures    []*Failure
	Elapsed     time.Duration
}

// Campaign runs seeds on parallel goroutines, one independent world each,
// and merges their results in seed order.
func Campaign(co CampaignOptions) (CampaignResult, error) {
	workers := co.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	type slot struct {
		done bool
		sum  Summary
		fail *Failure
		err  error
	}
	res := make([]slot, co.Seeds)
	var next atomic.Int64
	var firstFail atomic.Int64
	firstFail.Store(int64(co.Seeds))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				k := next.Add(1) - 1
				if k >= int64(co.Seeds) || (co.StopAtFirst && k > firstFail.Load()) {
					return
				}
				o := co.Base
				o.Seed, o.Trace, o.Timeline = co.First+uint64(k), nil, false
				r, err := Run(o)
				res[k] = slot{done: true, sum: r.Summary, fail: r.Failure, err: err}
				if r.Failure != nil || err != nil {
					for {
						cur := firstFail.Load()
						if k >= cur || firstFail.CompareAndSwap(cur, k) {
							break
						}
					}
				}
			}
		})
	}
	wg.Wait()
	out := CampaignResult{Rejections: map[string]int64{}, Elapsed: time.Since(start)}
	var wait hist
	for k := range res {
		r := &res[k]
		if !r.done {
			continue
		}
		if r.err != nil {
			return out, r.err
		}
		out.Runs++
		out.Events += int64(r.sum.Events)
		out.VirtualTime += r.sum.VirtualTime
		out.Admissions += r.sum.Admissions
		for c, n := range r.sum.Rejections {
			out.Rejections[c] += n
		}
		wait.merge(&r.sum.wait)
		if r.fail != nil {
			out.Failures = append(out.Failures, r.fail)
			if co.StopAtFirst {
				break
			}
		}
	}
	out.WaitP50, out.WaitP99 = wait.quantile(0.5), wait.quantile(0.99)
	return out, nil
}

// Write prints the campaign's totals.
func (c *CampaignResult) Write(w io.Writer) {
	s := Summary{Rejections: c.Rejections}
	rate := 0.0
	if c.Elapsed > 0 {
		rate = float64(c.Events) / c.Elapsed.Seconds()
	}
	fmt.Fprintf(w, "campaign: %d runs, %d events, %s virtual, %d admissions, rejections %s, wait p50 %s p99 %s\n",
		c.Runs, c.Events, dur(c.VirtualTime), c.Admissions, s.rejections(), dur(c.WaitP50), dur(c.WaitP99))
	fmt.Fprintf(w, "campaign: %d failures, %s wall, %.0f events/s\n", len(c.Failures), c.Elapsed.Round(time.Millisecond), rate)
}

// MutantResult says whether a campaign found one planted bug.
type MutantResult struct {
	Mutant  core.Mutants
	Caught  bool
	Failure *Failure // the lowest failing seed's failure
	Seeds   int      // seeds run
	Options Options  // the campaign's options (Seed unset)
	Elapsed time.Duration
}

// Mutants runs a campaign per mutant of core.AllMutants() (or only those
// in only, when not empty), each stopping at its first failing seed.
func Mutants(base Options, first uint64, seeds, workers int, only core.Mutants) ([]MutantResult, error) {
	var out []MutantResult
	for _, mu := range core.AllMutants() {
		if only != 0 && only&mu == 0 {
			continue
		}
		o := base
		o.Mutants = mu
		start := time.Now()
		cr, err := Campaign(CampaignOptions{First: first, Seeds: seeds, Workers: workers, Base: o, StopAtFirst: true})
		if err != nil {
			return out, err
		}
		r := MutantResult{Mutant: mu, Seeds: cr.Runs, Options: o, Elapsed: time.Since(start)}
		if len(cr.Failures) > 0 {
			r.Caught, r.Failure = true, cr.Failures[0]
		}
		out = append(out, r)
	}
	return out, nil
}

// WriteMutants prints one line per mutant and a total line:
//
//	sim: mutant <name> caught seed=<n> event=<k> check=<check> replay="<command>"
//	sim: mutant <name> survived seeds=<first>..<last> steps=<n>
//	sim: mutants caught <caught>/<total>
func WriteMutants(w io.Writer, first uint64, rs []MutantResult) {
	caught := 0
	for _, r := range rs {
		if r.Caught {
			caught++
			fmt.Fprintf(w, "sim: mutant %s caught seed=%d event=%d check=%s replay=%q\n", r.Mutant, r.Failure.Seed,
				r.Failure.Step, r.Failure.Check, r.Failure.Replay(r.Options))
			continue
		}
		fmt.Fprintf(w, "sim: mutant %s survived seeds=%d..%d steps=%d\n", r.Mutant, first, first+uint64(r.Seeds)-1, r.Options.steps())
	}
	fmt.Fprintf(w, "sim: mutants caught %d/%d\n", caught, len(rs))
}
