package sim

import (
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/core"
)

// Failure is a broken property found by a run.
type Failure struct {
	Seed    uint64
	Mutants core.Mutants
	// Check names what broke: "invariant:<Name>" for core's invariants,
	// "stall" for the liveness watchdog, "drain" for a run that never
	// finished, otherwise the oracle's property (for example "grant-version").
	Check  string
	Detail string
	// Step is the number of core events applied when it was seen (the last
	// of them broke it); Time is the virtual time.
	Step int
	Time int64
	// Chain is the stall's account of what the ticket waits on.
	Chain []string
}

// Error makes a Failure an error.
func (f *Failure) Error() string {
	return fmt.Sprintf("seed %d: %s at event %d (t=%s): %s", f.Seed, f.Check, f.Step, dur(f.Time), f.Detail)
}

// Replay is the command line that reproduces the failure with the
// options of the run that found it.
func (f *Failure) Replay(o Options) string {
	var b strings.Builder
	b.WriteString("sluice sim")
	if f.Mutants != 0 {
		fmt.Fprintf(&b, " --mutant %s", f.Mutants)
	}
	fmt.Fprintf(&b, " --seed %d --steps %d", f.Seed, o.steps())
	if o.Models > 0 {
		fmt.Fprintf(&b, " --models %d", o.Models)
	}
	if o.Faults != FaultsRandom {
		fmt.Fprintf(&b, " --faults %s", o.Faults)
	}
	switch o.Shutdown {
	case ModeAlways:
		b.WriteString(" --shutdown always")
	case ModeNever:
		b.WriteString(" --shutdown never")
	}
	if o.NoInvariants {
		b.WriteString(" --no-invariants")
	}
	if o.StallBound > 0 && o.StallBound != DefaultStallBound {
		fmt.Fprintf(&b, " --stall %dns", o.StallBound)
	}
	return b.String()
}
