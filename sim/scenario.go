package sim

import (
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/core"
)

// Virtual time units, in nanoseconds.
const (
	micros = int64(1e3)
	millis = int64(1e6)
	secs   = int64(1e9)
)

// rates are the fault and behaviour probabilities of a run, in parts per
// million.
type rates struct {
	load, probe, clone, infer, write int64 // backend step failures
	capLow                           int64 // a load or probe reports less capacity than usual
	slowTeardown, hungTeardown       int64 // teardown takes 20-100x, or seconds to a minute
	disconnect                       int64 // a client goes away at some point
	shellTimer                       int64 // the shell's admission timer cancels at the deadline
	misuse                           int64 // duplicate Release, duplicate completion, late Cancel
	burst, stream                    int64
}

// latencies are the median durations of backend steps.
type latencies struct {
	load, clone, probe, infer, chunk, teardown int64
	spread                                     int
}

// nameSpec is one model ID of a run and how its clients behave.
type nameSpec struct {
	id      string
	base    *core.Config
	initial bool  // registered at time 0
	gap     int64 // mean gap between arrivals while the model is in demand
	on, off int64 // mean lengths of the demand and quiet phases
	clients int   // client population: requests in flight at most
}

// scenario is everything a seed decides before the run starts: the swarm of
// features that this run exercises.
type scenario struct {
	opts     core.Options
	names    []nameSpec
	rate     rates
	lat      latencies
	faults   Faults
	mgrGap   int64 // mean gap between management operations
	bulkGap  int64 // mean gap between bulk unloads, 0 for none
	tickGap  int64 // mean gap between spurious ticks
	shutdown int   // core event count at which BeginShutdown comes, 0 for none
	capSalt  uint64
}

var tasks = [...]string{"tts", "asr", "vad"}

// engineOptions are the option sets configurations switch between.
var engineOptions = [...]string{"{}", `{"v":1}`, `{"v":2}`, `{"v":3}`}

var capTable = [...]int{1, 2, 4, 4, 8, 8, 16, 16}

// capacity is the parallel capacity the simulated engine advertises for a
// config's sessions: fixed per checkpoint and options within a run.
func (sc *scenario) capacity(c *core.Config) int {
	h := uint64(14695981039346656037) ^ sc.capSalt
	for _, str := range [...]string{c.Engine, c.Checkpoint, c.Options, c.Task} {
		for k := 0; k < len(str); k++ {
			h ^= uint64(str[k])
			h *= 1099511628211
		}
		h ^= 0xff
		h *= 1099511628211
	}
	return capTable[(h>>29)%uint64(len(capTable))]
}

func newScenario(o *Options, r rng) scenario {
	sc := scenario{capSalt: r.Uint64()}
	n := o.Models
	if n <= 0 {
		n = 1 + r.IntN(6)
	}
	sc.faults = o.Faults
	if sc.faults == FaultsRandom {
		switch x := r.IntN(20); {
		case x < 4:
			sc.faults = FaultsNone
		case x < 15:
			sc.faults = FaultsLow
		default:
			sc.faults = FaultsHigh
		}
	}
	switch sc.faults {
	case FaultsLow:
		sc.rate = rates{load: 30000, probe: 50000, clone: 20000, infer: 20000, write: 10000, capLow: 20000,
			slowTeardown: 30000, hungTeardown: 3000, disconnect: 50000, misuse: 10000}
	case FaultsHigh:
		sc.rate = rates{load: 200000, probe: 200000, clone: 100000, infer: 100000, write: 50000, capLow: 100000,
			slowTeardown: 150000, hungTeardown: 20000, disconnect: 200000, misuse: 50000}
	}
	sc.rate.shellTimer = r.between(0, 1_000_000)
	sc.rate.burst = r.between(0, 100000)
	sc.rate.stream = r.between(0, 500000)
	sc.lat = latencies{
		load: r.logUniform(20*millis, 500*millis), clone: r.logUniform(2*millis, 100*millis), probe: r.logUniform(10*millis, 200*millis),
		infer: r.logUniform(1*millis, 100*millis), chunk: r.logUniform(500*micros, 20*millis), teardown: r.logUniform(1*millis, 50*millis),
		spread: 2 + r.IntN(10),
	}
	opts := core.Options{Mutants: o.Mutants}
	if r.IntN(10) < 4 && n > 1 {
		opts.MaxLoadedModels = 1 + r.IntN(n-1)
	}
	if r.IntN(10) < 3 {
		opts.IdleTimeout = r.logUniform(100*millis, 5*secs)
	}
	if r.IntN(10) < 4 {
		opts.DefaultAdmissionTimeout = r.logUniform(20*millis, 3*secs)
	}
	if r.IntN(10) < 3 {
		opts.AdmissionCeiling = r.logUniform(200*millis, 10*secs)
	}
	opts.SerializeColdLoads = r.IntN(10) < 3
	var maxMB, sumMB, gapSum int64
	for i := range n {
		task := tasks[i%len(tasks)]
		c := &core.Config{Task: task, Engine: "fixture", Checkpoint: fmt.Sprintf("ck-%d", i), Options: "{}",
			MemoryMB: 50 * r.between(2, 40)}
		c.Slots = sc.pickSlots(r, c)
		c.AdmissionTimeout = admissionTimeout(r)
		if r.IntN(10) < 4 {
			c.MaxQueue = int(r.between(2, 40))
		}
		maxMB = max(maxMB, c.MemoryMB)
		sumMB += c.MemoryMB
		// Demand: a target utilisation of the model's slots (20% to 150%)
		// while its clients are active, from the mean service time.
		svc := (sc.lat.infer*(1_000_000-sc.rate.stream) + 5*sc.lat.chunk*sc.rate.stream) / 1_000_000
		gap := max(20*micros, svc*100/(int64(c.Slots)*r.between(20, 150)))
		// Not so busy that a run's events all fall inside one cold load.
		gap = max(gap, sc.lat.load/r.between(10, 100))
		gapSum += gap
		sc.names = append(sc.names, nameSpec{id: fmt.Sprintf("%s-%d", task, i), base: c, initial: i == 0 || r.IntN(10) < 7,
			gap: gap, on: r.logUniform(300*millis, 5*secs), off: r.logUniform(100*millis, 5*secs),
			clients: c.Slots + int(r.logUniform(1, 64))})
	}
	if r.IntN(10) < 3 && n > 1 {
		opts.MemoryBudgetMB = r.between(maxMB+250, max(maxMB+250, sumMB))
	}
	sc.opts = opts
	sc.mgrGap = gapSum / int64(n) * r.logUniform(20, 500)
	if r.IntN(10) < 9 {
		sc.bulkGap = sc.mgrGap * r.between(2, 20)
	}
	sc.tickGap = r.logUniform(100*millis, 10*secs)
	steps := o.steps()
	// Near the end: the last fifth of a short run, the last 20,000 events
	// of a long one.
	before := int64(min(steps/5, 20000))
	switch o.Shutdown {
	case ModeAlways:
		sc.shutdown = steps - int(r.between(0, before))
	case ModeRandom:
		if r.IntN(2) == 0 {
			sc.shutdown = steps - int(r.between(0, before))
		}
	}
	sc.shutdown = max(sc.shutdown, 0)
	// Drawn last, so the rest of a seed's scenario is as it was before the
	// backoff existed (CONTRACT.md fail.load-backoff).
	if r.IntN(2) == 0 {
		sc.opts.LoadBackoff = r.logUniform(10*millis, 2*secs)
		sc.opts.LoadBackoffMax = sc.opts.LoadBackoff * r.between(1, 64)
	}
	return sc
}

// admissionTimeout chooses a model's admission timeout: not set (the
// server default), unbounded, or a bound.
func admissionTimeout(r rng) int64 {
	switch x := r.IntN(10); {
	case x < 5:
		return core.NoTimeout
	case x == 5:
		return 0
	}
	return r.logUniform(10*millis, 2*secs)
}

// pickSlots chooses a slot count, usually one the engine supports.
func (sc *scenario) pickSlots(r rng, c *core.Config) int {
	capa := sc.capacity(c)
	if r.IntN(10) == 0 {
		return 1 + r.IntN(core.MaxSlots)
	}
	return 1 + r.IntN(capa)
}

// describe is a one-line account of the run's features.
func (sc *scenario) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d models, faults %s", len(sc.names), sc.faults)
	o := sc.opts
	if o.MaxLoadedModels > 0 {
		fmt.Fprintf(&b, ", max_loaded %d", o.MaxLoadedModels)
	}
	if o.MemoryBudgetMB > 0 {
		fmt.Fprintf(&b, ", budget %dMB", o.MemoryBudgetMB)
	}
	if o.IdleTimeout > 0 {
		fmt.Fprintf(&b, ", idle %s", dur(o.IdleTimeout))
	}
	if o.DefaultAdmissionTimeout > 0 {
		fmt.Fprintf(&b, ", admission %s", dur(o.DefaultAdmissionTimeout))
	}
	if o.AdmissionCeiling > 0 {
		fmt.Fprintf(&b, ", ceiling %s", dur(o.AdmissionCeiling))
	}
	if o.SerializeColdLoads {
		b.WriteString(", serial cold loads")
	}
	if o.LoadBackoff > 0 {
		fmt.Fprintf(&b, ", load backoff %s..%s", dur(o.LoadBackoff), dur(o.LoadBackoffMax))
	}
	if sc.shutdown > 0 {
		fmt.Fprintf(&b, ", shutdown at event %d", sc.shutdown)
	}
	if o.Mutants != 0 {
		fmt.Fprintf(&b, ", mutant %s", o.Mutants)
	}
	return b.String()
}

// variant returns a configuration change a management client might send:
// the same config, admission metadata only, a new slot count, new engine
// options or checkpoint, a new memory estimate, or an invalid config.
func (sc *scenario) variant(r rng, cur *core.Config) *core.Config {
	c := *cur
	switch x := r.IntN(20); {
	case x < 3: // unchanged
	case x < 6:
		c.AdmissionTimeout = admissionTimeout(r)
		c.MaxQueue = 0
		if r.IntN(2) == 0 {
			c.MaxQueue = int(r.between(1, 40))
		}
	case x < 10:
		c.Slots = sc.pickSlots(r, &c)
	case x < 14:
		c.Options = engineOptions[r.IntN(len(engineOptions))]
		if r.IntN(3) == 0 {
			c.Checkpoint = strings.TrimSuffix(c.Checkpoint, "-b")
			if r.IntN(2) == 0 {
				c.Checkpoint += "-b"
			}
		}
		if r.IntN(2) == 0 {
			c.Slots = sc.pickSlots(r, &c)
		}
	case x < 17:
		c.MemoryMB = 50 * r.between(2, 40)
	default:
		switch r.IntN(4) {
		case 0:
			c.Slots = core.MaxSlots + 1
		case 1:
			c.Slots = 0
		case 2:
			c.AdmissionTimeout = -2
		default:
			c.MaxQueue = -1
		}
	}
	return &c
}

// dur prints virtual nanoseconds readably.
func dur(ns int64) string {
	switch {
	case ns < 0:
		return "-" + dur(-ns)
	case ns >= 60*secs:
		return fmt.Sprintf("%dm%06.3fs", ns/(60*secs), float64(ns%(60*secs))/1e9)
	case ns >= secs:
		return fmt.Sprintf("%.3fs", float64(ns)/1e9)
	case ns >= millis:
		return fmt.Sprintf("%.3fms", float64(ns)/1e6)
	case ns >= micros:
		return fmt.Sprintf("%.1fus", float64(ns)/1e3)
	}
	return fmt.Sprintf("%dns", ns)
}
