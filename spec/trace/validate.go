// Package trace validates ndjson traces of core.Record lines, written by
// the live runtime (core/runtime) and the simulator (sim), against the spec
// in the spirit of etcd-io/raft's Traceetcdraft.tla: a trace is accepted
// only if it is a behaviour of the spec.
//
// The validator keeps the set of spec states the system may be in. Each
// event line, with the effect lines that follow it, advances every state by
// the event's action and the internal actions that no trace logs (searched
// exhaustively, bounded by abstract.MaxInternal), keeping the outcomes whose
// effects are exactly the logged ones; ticket numbers come from the trace,
// job numbers are bound when a Start effect names them. An empty set is a
// rejection, reported with the line and what the spec would have allowed.
// Slot numbers, which the spec leaves to the implementation, are checked on
// the side: a granted slot is in range and not held by another lease.
//
// The machine options are read from <trace>.options.json beside the trace
// (core/runtime.TraceFromEnv writes it). Without them, what depends on
// options (residency, the cold-load guard, deadlines, idle retirement)
// becomes a free choice of the spec. Times are not checked: a timeout or
// an overdue fail-fast is accepted whenever the ticket has a deadline.
//
// Threading rule: a Validator is used by one goroutine; separate
// Validators are independent.
package trace

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
)

// MaxCandidates bounds the set of spec states a validator keeps.
const MaxCandidates = 20000

// Validator advances the set of spec states a trace may be in.
type Validator struct {
	p     abstract.Params
	cands []*abstract.State
	// slots: per model, slot -> ticket of the running lease (side check).
	slots map[string]map[int32]uint64
	lines int
	steps int
	// configs interns the configs the trace's events carry (its own: no
	// other check compares keys with this one).
	configs *abstract.ConfigTable
}

// New returns a validator for a trace that starts from an empty machine
// with options o (nil: unknown options).
func New(o *core.Options) *Validator {
	p := abstract.Params{Loose: true}
	if o != nil {
		p = abstract.ParamsOf(*o)
	}
	return &Validator{p: p, cands: []*abstract.State{{}}, slots: map[string]map[int32]uint64{}, configs: abstract.NewConfigTable()}
}

// Steps returns the number of events validated so far.
func (v *Validator) Steps() int { return v.steps }

// Candidates returns the number of spec states the trace may be in.
func (v *Validator) Candidates() int { return len(v.cands) }

// Error is a rejected trace: the line of the event that no spec behaviour
// explains, and why.
type Error struct {
	Line   int
	Event  string
	Detail string
}

// Error formats the rejection with its line.
func (e *Error) Error() string { return fmt.Sprintf("line %d: %s: %s", e.Line, e.Event, e.Detail) }

// Validate reads a whole trace and returns nil when it is a behaviour of
// the spec, or an *Error.
func Validate(r io.Reader, o *core.Options) (steps int, err error) {
	v := New(o)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	var ev *core.Record
	evLine := 0
	var effs []core.Record
	for line := 1; sc.Scan(); line++ {
		b := strings.TrimSpace(sc.Text())
		if b == "" {
			continue
		}
		var rec core.Record
		if err := json.Unmarshal([]byte(b), &rec); err != nil {
			return v.steps, &Error{Line: line, Event: "?", Detail: fmt.Sprintf("not a core.Record: %v", err)}
		}
		switch {
		case rec.Ev != "":
			if ev != nil {
				if err := v.Step(evLine, *ev, effs); err != nil {
					return v.steps, err
				}
			}
			ev, evLine, effs = &rec, line, effs[:0]
		case rec.Ef != "":
			if ev == nil {
				return v.steps, &Error{Line: line, Event: rec.Ef, Detail: "an effect before any event"}
			}
			effs = append(effs, rec)
		default:
			return v.steps, &Error{Line: line, Event: "?", Detail: "neither an event nor an effect"}
		}
	}
	if err := sc.Err(); err != nil {
		return v.steps, fmt.Errorf("trace: read: %w", err)
	}
	if ev != nil {
		if err := v.Step(evLine, *ev, effs); err != nil {
			return v.steps, err
		}
	}
	return v.steps, nil
}

// Step advances the validator by one event record and the effect records
// that followed it.
func (v *Validator) Step(line int, evr core.Record, effs []core.Record) error {
	v.lines = line
	v.steps++
	ev, err := evr.Event()
	if err != nil {
		return &Error{Line: line, Event: evr.Ev, Detail: err.Error()}
	}
	want, jobs, err := loggedEffects(effs)
	if err != nil {
		return &Error{Line: line, Event: evr.Ev, Detail: err.Error()}
	}
	var next []*abstract.State
	seen := map[string]bool{}
	var allowed []string
	for _, s := range v.cands {
		a, ok := action(v.configs, s, ev, evr)
		if a.TickGiven {
			a.Expire, a.Retire = tickChoice(effs)
		}
		var outs []abstract.Outcome
		if ok {
			outs, err = abstract.Step(s, a, &v.p)
		}
		if !ok || err != nil {
			// The machine refuses a completion for a stale job, a release or
			// cancel of a finished ticket: nothing changes, nothing is emitted.
			outs = []abstract.Outcome{{State: s}}
		}
		for _, o := range outs {
			got := specEffects(o.State, o.Effects)
			if !slices.Equal(got, want) {
				if len(allowed) < 3 {
					allowed = append(allowed, "["+strings.Join(got, ", ")+"]")
				}
				continue
			}
			st := o.State
			if len(jobs) > 0 {
				st = st.Clone()
				for id, j := range jobs {
					if i := st.Lookup(id); i >= 0 {
						st.Models[i].JobID = j
					}
				}
			}
			if err := abstract.CheckInvariants(st, &v.p); err != nil {
				if len(allowed) < 3 {
					allowed = append(allowed, "a state breaking "+err.Error())
				}
				continue
			}
			if err := observationsAgree(st, effs); err != nil {
				if len(allowed) < 3 {
					allowed = append(allowed, "a state where "+err.Error())
				}
				continue
			}
			k := string(st.AppendExactKey(nil))
			if !seen[k] {
				seen[k] = true
				next = append(next, st)
			}
		}
	}
	if len(next) == 0 {
		return &Error{Line: line, Event: describe(evr), Detail: fmt.Sprintf("logged [%s]; the spec allows %s",
			strings.Join(want, ", "), strings.Join(allowed, " or "))}
	}
	if len(next) > MaxCandidates {
		return &Error{Line: line, Event: describe(evr), Detail: fmt.Sprintf("%d candidate spec states: the trace is too ambiguous", len(next))}
	}
	if err := v.slotCheck(evr, effs, next[0]); err != nil {
		return &Error{Line: line, Event: describe(evr), Detail: err.Error()}
	}
	v.cands = next
	return nil
}

// action returns the spec action an event record stands for in state s.
func action(configs *abstract.ConfigTable, s *abstract.State, ev core.Event, r core.Record) (abstract.Action, bool) {
	a := abstract.Action{Kind: ev.Kind, Model: ev.Model, Models: ev.Models, Op: ev.Op, Timeout: ev.Timeout,
		Ticket: r.Ticket, Reason: ev.Reason, Failed: ev.Failed, Capacity: ev.Capacity, Now: ev.Now}
	if ev.Config != nil {
		a.Cfg = configs.FromCore(ev.Config)
		a.BaseVersion, a.RegisterOnly = ev.Config.BaseVersion, ev.Config.RegisterOnly
	}
	if ev.Kind == core.EvTick {
		a.TickGiven = true
	}
	var want abstract.Job
	switch ev.Kind {
	case core.EvLoadDone:
		want = abstract.JLoad
	case core.EvCloneDone:
		want = abstract.JClone
	case core.EvProbeDone:
		want = abstract.JProbe
	case core.EvTeardownDone:
		want = abstract.JTeardown
	default:
		return a, true
	}
	for i := range s.Models {
		if md := &s.Models[i]; md.JobID == r.Job && md.Job == want {
			a.Model = md.ID
			return a, true
		}
	}
	return a, false
}

// tickChoice reads a Tick's choice from its logged effects: the tickets
// rejected server_busy expired, the models torn down for idleness retired.
func tickChoice(effs []core.Record) (expire []uint64, retire []string) {
	for _, r := range effs {
		switch {
		case r.Ef == "Reject" && r.Code == "server_busy":
			expire = append(expire, r.Ticket)
		case r.Ef == "StartTeardown" && r.Cause == "idle":
			retire = append(retire, r.Model)
		}
	}
	return expire, retire
}

// loggedEffects normalises effect records and returns the jobs they start,
// by model.
func loggedEffects(effs []core.Record) ([]string, map[string]uint64, error) {
	out := make([]string, 0, len(effs))
	var jobs map[string]uint64
	for _, r := range effs {
		var s string
		switch r.Ef {
		case "Grant":
			s = fmt.Sprintf("Grant t%d %s v%d", r.Ticket, r.Model, r.Version)
		case "Reject":
			s = fmt.Sprintf("Reject t%d %s", r.Ticket, r.Code)
		case "Done":
			s = fmt.Sprintf("Done t%d", r.Ticket)
			if len(r.Unloaded)+len(r.NotFound) > 0 {
				s += fmt.Sprintf(" unloaded=%v not_found=%v", r.Unloaded, r.NotFound)
			}
		case "StartLoad":
			s = fmt.Sprintf("StartLoad %s v%d %s", r.Model, r.Version, cfgString(traceCfg(r.Config)))
		case "StartClone":
			s = fmt.Sprintf("StartClone %s #%d v%d", r.Model, r.Index, r.Version)
		case "StartProbe":
			s = fmt.Sprintf("StartProbe %s v%d %s", r.Model, r.Version, cfgString(traceCfg(r.Config)))
		case "StartTeardown":
			cause := r.Cause
			if cause == "" {
				cause = "none"
			}
			s = fmt.Sprintf("StartTeardown %s sessions=%d cause=%s v%d", r.Model, r.Sessions, cause, r.Version)
		case "ShutdownComplete":
			s = "ShutdownComplete"
		case "Publish", "Retire":
			// Observations of a decision the spec's state already holds
			// (core.EffectKind.Observation): the spec has no such effect.
			continue
		default:
			return nil, nil, fmt.Errorf("unknown effect %q", r.Ef)
		}
		if strings.HasPrefix(r.Ef, "Start") {
			if jobs == nil {
				jobs = map[string]uint64{}
			}
			jobs[r.Model] = r.Job
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out, jobs, nil
}

// specEffects normalises spec effects the same way.
func specEffects(s *abstract.State, effs []abstract.Effect) []string {
	out := make([]string, 0, len(effs))
	name := func(i int) string {
		if i >= 0 && i < len(s.Models) {
			return s.Models[i].ID
		}
		return "?"
	}
	for _, e := range effs {
		var x string
		switch e.Kind {
		case core.EfGrant:
			x = fmt.Sprintf("Grant t%d %s v%d", e.Ticket, name(e.Model), e.Ver)
		case core.EfReject:
			x = fmt.Sprintf("Reject t%d %s", e.Ticket, e.Code)
		case core.EfDone:
			x = fmt.Sprintf("Done t%d", e.Ticket)
			if e.Bulk != nil && len(e.Bulk.Unloaded)+len(e.Bulk.NotFound) > 0 {
				x += fmt.Sprintf(" unloaded=%v not_found=%v", e.Bulk.Unloaded, e.Bulk.NotFound)
			}
		case core.EfStartLoad:
			x = fmt.Sprintf("StartLoad %s v%d %s", name(e.Model), e.Ver, cfgString(e.Cfg))
		case core.EfStartClone:
			x = fmt.Sprintf("StartClone %s #%d v%d", name(e.Model), e.Index, e.Ver)
		case core.EfStartProbe:
			x = fmt.Sprintf("StartProbe %s v%d %s", name(e.Model), e.Ver, cfgString(e.Cfg))
		case core.EfStartTeardown:
			x = fmt.Sprintf("StartTeardown %s sessions=%d cause=%s v%d", name(e.Model), e.Sessions, e.Cause, e.Ver)
		case core.EfShutdownComplete:
			x = "ShutdownComplete"
		}
		out = append(out, x)
	}
	slices.Sort(out)
	return out
}

func traceCfg(c *core.TraceConfig) *abstract.Config {
	if c == nil {
		return nil
	}
	return &abstract.Config{Task: c.Task, Engine: c.Engine, Checkpoint: c.Checkpoint, Options: c.Options,
		Slots: c.Slots, AdmissionTimeout: c.AdmissionTimeout, MaxQueue: c.MaxQueue, MemoryMB: c.MemoryMB, Aliases: c.Aliases, VoiceMap: c.VoiceMap}
}

func cfgString(c *abstract.Config) string {
	if c == nil {
		return "<no config>"
	}
	return fmt.Sprintf("{%s %s %s %s slots=%d timeout=%d maxq=%d mem=%d}", c.Task, c.Engine, c.Checkpoint, c.Options,
		c.Slots, c.AdmissionTimeout, c.MaxQueue, c.MemoryMB)
}

// slotCheck keeps the side table of granted slots: a Grant names a slot in
// range that no running lease holds; a Release frees it.
func (v *Validator) slotCheck(evr core.Record, effs []core.Record, s *abstract.State) error {
	if evr.Ev == "Release" {
		for _, tbl := range v.slots {
			for slot, t := range tbl {
				if t == evr.Ticket && evr.Ticket != 0 {
					delete(tbl, slot)
				}
			}
		}
	}
	for _, r := range effs {
		if r.Ef != "Grant" {
			continue
		}
		tbl := v.slots[r.Model]
		if tbl == nil {
			tbl = map[int32]uint64{}
			v.slots[r.Model] = tbl
		}
		if i := s.Lookup(r.Model); i >= 0 && (r.Slot < 0 || int(r.Slot) >= s.Models[i].Cfg.Slots) {
			return fmt.Errorf("grant of slot %d of %s, which has %d slots", r.Slot, r.Model, s.Models[i].Cfg.Slots)
		}
		if t, busy := tbl[r.Slot]; busy {
			return fmt.Errorf("grant of slot %d of %s to ticket %d while ticket %d holds it", r.Slot, r.Model, r.Ticket, t)
		}
		tbl[r.Slot] = r.Ticket
	}
	return nil
}

func describe(r core.Record) string {
	var b strings.Builder
	b.WriteString(r.Ev)
	if r.Model != "" {
		b.WriteString(" " + r.Model)
	}
	if len(r.Models) > 0 {
		fmt.Fprintf(&b, " %v", r.Models)
	}
	if r.Op != "" {
		b.WriteString(" op=" + r.Op)
	}
	if r.Ticket != 0 {
		fmt.Fprintf(&b, " ticket=%d", r.Ticket)
	}
	if r.Job != 0 {
		fmt.Fprintf(&b, " job=%d", r.Job)
	}
	if r.Reason != "" {
		b.WriteString(" reason=" + r.Reason)
	}
	if r.Failed {
		b.WriteString(" failed")
	}
	if r.Capacity != 0 {
		fmt.Fprintf(&b, " capacity=%d", r.Capacity)
	}
	return b.String()
}

// ErrNoTraces is returned by ValidateDir when the directory holds no trace.
var ErrNoTraces = errors.New("trace: no traces")

// observationsAgree checks the Publish records of a step against the spec
// state it reached: the spec has no such effect, but the pool it reports
// must be the one the state holds published, with its advertised
// capacity. A pool retired later in the same step is not checked (the
// state no longer holds it), nor is the version: a manager granted later
// in the same step may commit a new one onto the same pool.
func observationsAgree(st *abstract.State, effs []core.Record) error {
	for k, r := range effs {
		if r.Ef != "Publish" || slices.ContainsFunc(effs[k+1:], func(x core.Record) bool { return x.Ef == "Retire" && x.Model == r.Model }) {
			continue
		}
		i := st.Lookup(r.Model)
		if i < 0 {
			return fmt.Errorf("%s, published, is not registered", r.Model)
		}
		md := &st.Models[i]
		if !md.Published || md.Capacity != r.Capacity {
			return fmt.Errorf("%s is published=%v with capacity %d, the trace's Publish says capacity %d",
				r.Model, md.Published, md.Capacity, r.Capacity)
		}
	}
	return nil
}
