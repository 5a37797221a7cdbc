package sim

import (
	"fmt"
	"io"
	"strings"

	"github.com/sluice-dev/sluice/core"
)

// Mode chooses a per-run feature: left to the seed, always on, or off.
type Mode uint8

// The modes.
const (
	ModeRandom Mode = iota // the seed decides
	ModeAlways
	ModeNever
)

// ParseMode reads "random", "always" or "never".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "random", "":
		return ModeRandom, nil
	case "always", "on", "yes":
		return ModeAlways, nil
	case "never", "off", "no":
		return ModeNever, nil
	}
	return 0, fmt.Errorf("sim: mode %q: want random, always or never", s)
}

// Faults is how often simulated engines and clients misbehave.
type Faults uint8

// The fault levels.
const (
	FaultsRandom Faults = iota // the seed decides
	FaultsNone
	FaultsLow
	FaultsHigh
)

var faultNames = [...]string{"random", "none", "low", "high"}

// String names the fault level.
func (f Faults) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return fmt.Sprintf("faults(%d)", f)
}

// ParseFaults reads a fault level name.
func ParseFaults(s string) (Faults, error) {
	for k, n := range faultNames {
		if n == s {
			return Faults(k), nil
		}
	}
	if s == "" {
		return FaultsRandom, nil
	}
	return 0, fmt.Errorf("sim: faults %q: want %s", s, strings.Join(faultNames[:], ", "))
}

// DefaultSteps is the number of core events of a run when Options.Steps is 0.
const DefaultSteps = 5000

// DefaultStallBound is the watchdog's bound in virtual time: a ticket that
// waits this long while nothing in flight can wake it is a stall.
const DefaultStallBound = int64(10e9)

// Options configures one simulated run. The zero value (plus a seed) is a
// short run whose every feature the seed chooses.
type Options struct {
	// Seed selects the scenario and every random draw; a seed replays exactly.
	Seed uint64
	// Steps is the number of core events before the workload stops and the
	// run drains (DefaultSteps when 0).
	Steps int
	// Models is the number of model IDs (0: the seed picks 1..6).
	Models int
	// Mutants plants core bugs (core.Options.Mutants).
	Mutants core.Mutants
	// Shutdown chooses whether BeginShutdown happens near the end.
	Shutdown Mode
	// Faults chooses the fault rates.
	Faults Faults
	// StallBound is the watchdog bound in virtual nanoseconds
	// (DefaultStallBound when 0).
	StallBound int64
	// Trace, when set, receives the ndjson trace (core.Record lines) of
	// every event core accepted and the effects it emitted.
	Trace io.Writer
	// Timeline records per-model state, slots and queues for WriteTimeline.
	Timeline bool
	// NoInvariants skips core.CheckInvariants after each event (benchmarks
	// only: it measures what the invariants cost).
	NoInvariants bool

	record bool // keep the core events for minimization
	stopAt int  // stop after this many core events (0: run to the end)

	_ struct{}
}

func (o *Options) steps() int {
	if o.Steps > 0 {
		return o.Steps
	}
	return DefaultSteps
}

func (o *Options) stallBound() int64 {
	if o.StallBound > 0 {
		return o.StallBound
	}
	return DefaultStallBound
}
