package linmodel

import (
	"fmt"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/sluice-dev/sluice/core"
)

// Models is the number of models a history runs on; Input.Model == Models
// is an ID that is never registered.
const Models = 3

// Config is one model spec of a history's config table.
type Config struct {
	Family     int // equal families have equal options: equal sessions
	Slots      int
	Capacity   int
	FailLoad   bool
	FailProbe  bool
	FailClone  int   // fail_clone_at, 0 none
	MemoryMB   int64 // memory_mb of the family's options
	Admission  int   // admission timeout in ms, 0: not set
	MaxQueue   int
	Invalid    bool // refused by validation before anything changes
	OptionJSON string
}

// loadCode is the outcome of loading c (CONTRACT.md fail.initial-load).
func (c *Config) loadCode() core.Code {
	switch {
	case c.FailLoad:
		return core.CodeBackend
	case c.Capacity < c.Slots:
		return core.CodeInvalid
	case c.FailClone > 0 && c.FailClone < c.Slots:
		return core.CodeBackend
	}
	return core.CodeOK
}

// probeCode is the outcome of probing c's capacity before a commit.
func (c *Config) probeCode() core.Code {
	switch {
	case c.FailProbe:
		return core.CodeBackend
	case c.Capacity < c.Slots:
		return core.CodeInvalid
	}
	return core.CodeOK
}

func sameSessions(a, b *Config) bool { return a.Family == b.Family }

func sameConfig(a, b *Config) bool {
	return a.Family == b.Family && a.Slots == b.Slots && a.Admission == b.Admission && a.MaxQueue == b.MaxQueue
}

// Kind is an operation of a history.
type Kind uint8

// The operations of a history.
const (
	Infer      Kind = iota + 1
	Apply           // register or reconfigure, then load (PUT over HTTP)
	Load            // load manager
	Unload          // unload manager
	BulkMember      // one member of a bulk unload
	Status          // status of all models
	StatusOne       // the status a manager returned, of its model only
)

var kindNames = [...]string{"", "infer", "apply", "load", "unload", "bulk", "status", "status1"}

// String is the operation's name in descriptions.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind%d", k)
}

// Input is an operation's call.
type Input struct {
	Kind   Kind
	Model  int  // 0..Models-1, or Models for an unknown ID
	Config int  // Apply: index into Spec.Configs
	Fail   bool // Infer: the fixture fails the inference
	Busy   bool // a bounded wait applied, so server_busy is possible
}

// Row is one model's row of a status read.
type Row struct {
	Model    int // index of the row's ID, -1 for an ID not of this history
	Version  uint64
	Slots    int
	MemoryMB int64 // compared only with Spec.Memory
}

// Output is an operation's answer.
type Output struct {
	Code    core.Code
	Unknown bool   // the caller went away: any of the effects, or none
	Version uint64 // Infer
	Slot    int    // Infer
	Found   bool   // BulkMember: named in the answer's unloaded list
	Rows    []Row  // Status, StatusOne
}

// Spec is the model of one history: its config table and what its target
// shows.
type Spec struct {
	// Configs is the history's config table; Input.Config indexes it.
	Configs []Config
	// Memory: status rows show each version's memory, which must be the
	// committed config's (the runtime's status does, the HTTP model object
	// does not).
	Memory bool
	// BusyRegister: server_busy may also answer an apply that registers, not
	// only waits on a registered model (a target whose residency limits the
	// checker does not know).
	BusyRegister bool
	// Backoff: the target backs off after a failed load (CONTRACT.md
	// fail.load-backoff): until a granted manager or a successful load, an
	// inference that would load the model may be refused server_busy (the
	// backoff may also have run out: time is not modelled).
	Backoff bool

	_ struct{}
}

// model is the per-model part of the sequential state.
type model struct {
	reg     bool
	order   int8
	ver     uint16
	cfg     int8
	loaded  bool
	backoff bool // a load failed since the last granted manager or successful load
}

// state is the whole sequential state; it is comparable, so porcupine's
// default equality works.
type state struct {
	m    [Models]model
	nreg int8
}

// outcome is one possible result of an operation in a state.
type outcome struct {
	code core.Code
	next state
}

// Model is the porcupine model of sp.
func (sp *Spec) Model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{state{}} },
		Step: func(st, input, output any) []any {
			return sp.step(st.(state), input.(Input), output.(Output))
		},
		DescribeOperation: func(input, output any) string { return sp.describeOp(input.(Input), output.(Output)) },
		DescribeState:     func(st any) string { return describeState(st.(state)) },
	}
	return nm.ToModel()
}

func (s *state) registered(i int) bool { return i < Models && s.m[i].reg }

// step returns the states the operation can lead to with the observed
// output; none means the output is impossible in this state.
func (sp *Spec) step(s state, in Input, out Output) []any {
	var outs []outcome
	switch in.Kind {
	case Infer:
		outs = sp.infer(s, in)
	case Apply:
		outs = sp.apply(s, in)
	case Load:
		outs = sp.load(s, in)
	case Unload:
		outs = unload(s, in)
	case BulkMember:
		return bulkMember(s, in, out)
	case Status:
		if out.Unknown || sp.statusMatches(s, out.Rows) {
			return []any{s}
		}
		return nil
	case StatusOne:
		if len(out.Rows) == 1 && sp.rowMatches(s, in.Model, out.Rows[0]) {
			return []any{s}
		}
		return nil
	}
	// server_busy changes nothing, and only a wait can end in it.
	if in.Busy && (s.registered(in.Model) || in.Kind == Apply && sp.BusyRegister) {
		outs = append(outs, outcome{code: core.CodeServerBusy, next: s})
	}
	var next []any
	if out.Unknown {
		next = append(next, s)
		for _, o := range outs {
			next = append(next, o.next)
		}
		return next
	}
	for _, o := range outs {
		if o.code != out.Code {
			continue
		}
		if o.code == core.CodeOK && in.Kind == Infer && !sp.inferMatches(o.next, in, out) {
			continue
		}
		next = append(next, o.next)
	}
	return next
}

// inferMatches reports whether a successful inference ran on the committed
// version of its instant, on a slot of that version's pool.
func (sp *Spec) inferMatches(s state, in Input, out Output) bool {
	m := s.m[in.Model]
	return out.Version == uint64(m.ver) && out.Slot >= 0 && out.Slot < sp.Configs[m.cfg].Slots
}

func (sp *Spec) infer(s state, in Input) []outcome {
	if !s.registered(in.Model) {
		return []outcome{{code: core.CodeNotFound, next: s}}
	}
	if m := &s.m[in.Model]; !m.loaded {
		var busy []outcome
		if m.backoff {
			busy = append(busy, outcome{code: core.CodeServerBusy, next: s}) // refused: nothing changes
		}
		if code := sp.Configs[m.cfg].loadCode(); code != core.CodeOK {
			m.backoff = sp.Backoff
			return append(busy, outcome{code: code, next: s})
		}
		m.loaded, m.backoff = true, false
		if in.Fail {
			return append(busy, outcome{code: core.CodeBackend, next: s})
		}
		return append(busy, outcome{code: core.CodeOK, next: s})
	}
	if in.Fail {
		return []outcome{{code: core.CodeBackend, next: s}}
	}
	return []outcome{{code: core.CodeOK, next: s}}
}

// ensureLoad is a load manager on a registered model (granted: its backoff
// was reset); a failed load backs off again.
func (sp *Spec) ensureLoad(s state, i int) outcome {
	m := &s.m[i]
	if !m.loaded {
		if code := sp.Configs[m.cfg].loadCode(); code != core.CodeOK {
			m.backoff = sp.Backoff
			return outcome{code: code, next: s}
		}
		m.loaded = true
	}
	return outcome{code: core.CodeOK, next: s}
}

func (sp *Spec) load(s state, in Input) []outcome {
	if !s.registered(in.Model) {
		return []outcome{{code: core.CodeNotFound, next: s}}
	}
	s.m[in.Model].backoff = false // granted
	return []outcome{sp.ensureLoad(s, in.Model)}
}

func unload(s state, in Input) []outcome {
	if !s.registered(in.Model) {
		return []outcome{{code: core.CodeNotFound, next: s}}
	}
	s.m[in.Model].loaded, s.m[in.Model].backoff = false, false
	return []outcome{{code: core.CodeOK, next: s}}
}

// apply is the contract's register/reconfigure decision tree (core.apply).
func (sp *Spec) apply(s state, in Input) []outcome {
	n := &sp.Configs[in.Config]
	if n.Invalid {
		return []outcome{{code: core.CodeInvalid, next: s}}
	}
	i := in.Model
	m := &s.m[i]
	m.backoff = false // granted (a new entry has none)
	if !m.reg {       // register, then load
		*m = model{reg: true, order: s.nreg, ver: 1, cfg: int8(in.Config)}
		s.nreg++
		return []outcome{sp.ensureLoad(s, i)}
	}
	o := &sp.Configs[m.cfg]
	replace := func() outcome {
		m.ver++
		m.cfg = int8(in.Config)
		m.loaded = false
		return sp.ensureLoad(s, i)
	}
	switch {
	case sameConfig(n, o):
		return []outcome{sp.ensureLoad(s, i)}
	case sameSessions(n, o) && n.Slots == o.Slots:
		m.ver++
		m.cfg = int8(in.Config)
		return []outcome{sp.ensureLoad(s, i)}
	case n.Slots > 1 && m.loaded && sameSessions(n, o):
		if n.Slots > o.Capacity {
			return []outcome{{code: core.CodeInvalid, next: s}}
		}
		return []outcome{replace()}
	case n.Slots > 1:
		if code := n.probeCode(); code != core.CodeOK {
			return []outcome{{code: code, next: s}}
		}
		return []outcome{replace()}
	}
	return []outcome{replace()}
}

func bulkMember(s state, in Input, out Output) []any {
	reg := s.registered(in.Model)
	if out.Unknown {
		if !reg {
			return []any{s}
		}
		n := s
		n.m[in.Model].loaded, n.m[in.Model].backoff = false, false
		return []any{s, n}
	}
	if out.Found != reg {
		return nil
	}
	if reg {
		s.m[in.Model].loaded, s.m[in.Model].backoff = false, false
	}
	return []any{s}
}

func (sp *Spec) statusMatches(s state, rows []Row) bool {
	if len(rows) != int(s.nreg) {
		return false
	}
	for i := range Models {
		if m := &s.m[i]; m.reg && !sp.rowMatches(s, i, rows[m.order]) {
			return false
		}
	}
	return true
}

// rowMatches reports whether a status row shows model i's committed version
// with that version's slot count (and memory, with sp.Memory).
func (sp *Spec) rowMatches(s state, i int, x Row) bool {
	if !s.registered(i) {
		return false
	}
	m := &s.m[i]
	c := &sp.Configs[m.cfg]
	return x.Model == i && x.Version == uint64(m.ver) && x.Slots == c.Slots && (!sp.Memory || x.MemoryMB == c.MemoryMB)
}

// Name is how descriptions write model index i: a, b, c, and z for the ID
// that is never registered.
func Name(i int) string {
	if i < 0 || i > Models {
		return "?"
	}
	if i == Models {
		return "z"
	}
	return string(rune('a' + i))
}

func (sp *Spec) describeOp(in Input, out Output) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s(%s", in.Kind, Name(in.Model))
	if in.Kind == Apply {
		c := &sp.Configs[in.Config]
		fmt.Fprintf(&b, ", cfg%d slots=%d %s", in.Config, c.Slots, c.OptionJSON)
		if c.Invalid {
			b.WriteString(" invalid")
		}
	}
	if in.Fail {
		b.WriteString(", fail")
	}
	b.WriteString(") -> ")
	switch {
	case out.Unknown:
		b.WriteString("?")
	case in.Kind == Status || in.Kind == StatusOne:
		for _, x := range out.Rows {
			fmt.Fprintf(&b, "%s:v%d/%d ", Name(x.Model), x.Version, x.Slots)
			if sp.Memory {
				fmt.Fprintf(&b, "%dMB ", x.MemoryMB)
			}
		}
	case in.Kind == BulkMember:
		fmt.Fprintf(&b, "found=%v", out.Found)
	case out.Code == core.CodeOK:
		fmt.Fprintf(&b, "ok v%d slot %d", out.Version, out.Slot)
	default:
		b.WriteString(out.Code.String())
	}
	return b.String()
}

func describeState(s state) string {
	var b strings.Builder
	for i, m := range s.m {
		if m.reg {
			fmt.Fprintf(&b, "%s: v%d cfg%d loaded=%v backoff=%v; ", Name(i), m.ver, m.cfg, m.loaded, m.backoff)
		}
	}
	return b.String()
}
