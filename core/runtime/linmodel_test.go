package runtime

import (
	"fmt"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/sluice-dev/sluice/core"
)

// This file is the sequential model of the contract that porcupine checks
// live histories against. It transcribes the observable effect of each
// operation as if it ran alone, at one instant:
//
//   - an inference on a registered model binds the committed config version
//     of that instant and runs on a slot below that config's slot count; on
//     an unloaded model it first loads the committed config, which fails
//     exactly as the fixture options say (fail_load, fail_clone_at below the
//     slot count, capacity below the slot count);
//   - register/reconfigure follows the decision tree of the contract
//     (validate, reuse live capacity or probe, retire, commit, load), so a
//     failure before commit keeps everything and a failure after commit
//     leaves the new version unloaded;
//   - unload and each member of a bulk unload clear residency; a bulk's
//     members are separate operations within the bulk's interval (the bulk
//     is not an atomic all-model unload, CONTRACT.md "Bulk work");
//   - status is one atomic snapshot of all models: the registered IDs in
//     registration order, each with its committed version and that
//     version's slot count and memory, never a partial mix;
//   - server_busy (admission timeout, full queue, overdue blockers) changes
//     nothing; an operation whose caller went away has an unknown outcome
//     and may have taken any of its effects, or none.

const linModels = 3

var linIDs = [linModels]string{"a", "b", "c"}

// linCfg is one model spec of a history's config table.
type linCfg struct {
	family     int // equal families have equal options: equal sessions
	slots      int
	capacity   int
	failLoad   bool
	failProbe  bool
	failClone  int // fail_clone_at, 0 none
	memoryMB   int64
	admission  int // admission timeout in ms
	maxQueue   int
	invalid    bool // refused by validation before anything changes
	optionJSON string
}

func (c *linCfg) loadCode() core.Code {
	switch {
	case c.failLoad:
		return core.CodeBackend
	case c.capacity < c.slots:
		return core.CodeInvalid
	case c.failClone > 0 && c.failClone < c.slots:
		return core.CodeBackend
	}
	return core.CodeOK
}

func (c *linCfg) probeCode() core.Code {
	switch {
	case c.failProbe:
		return core.CodeBackend
	case c.capacity < c.slots:
		return core.CodeInvalid
	}
	return core.CodeOK
}

func sameSessions(a, b *linCfg) bool { return a.family == b.family }

func sameConfig(a, b *linCfg) bool {
	return a.family == b.family && a.slots == b.slots && a.admission == b.admission && a.maxQueue == b.maxQueue
}

// linModel is the per-model part of the sequential state.
type linModel struct {
	reg    bool
	order  int8
	ver    uint16
	cfg    int8
	loaded bool
}

// linState is the whole sequential state; it is comparable, so porcupine's
// default equality works.
type linState struct {
	m    [linModels]linModel
	nreg int8
}

type opKind uint8

const (
	opInfer opKind = iota + 1
	opApply
	opLoad
	opUnload
	opBulkMember
	opStatus
	opStatusOne // the status a manager returned, of its model only
)

var opNames = [...]string{"", "infer", "apply", "load", "unload", "bulk", "status", "status1"}

type linInput struct {
	kind  opKind
	model int // index into linIDs, or linModels for an unknown ID
	cfg   int // apply
	fail  bool
	busy  bool // a bounded wait applied, so server_busy is possible
}

type linStatus struct {
	id      string
	version uint64
	slots   int
	mem     int64
}

type linOutput struct {
	code    core.Code
	unknown bool
	version uint64 // infer, apply, load
	slot    int
	found   bool // bulk member: in Unloaded
	status  []linStatus
}

// linSpec is the model for one history.
type linSpec struct {
	cfgs []linCfg
}

func (ls *linSpec) model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{linState{}} },
		Step: func(state, input, output any) []any {
			return ls.step(state.(linState), input.(linInput), output.(linOutput))
		},
		DescribeOperation: func(input, output any) string { return ls.describeOp(input.(linInput), output.(linOutput)) },
		DescribeState:     func(state any) string { return ls.describeState(state.(linState)) },
	}
	return nm.ToModel()
}

// outcome is one possible result of an operation in a state.
type linOutcome struct {
	code    core.Code
	version uint16
	next    linState
}

// step returns the states the operation can lead to with the observed
// output; none means the output is impossible in this state.
func (ls *linSpec) step(s linState, in linInput, out linOutput) []any {
	var outs []linOutcome
	switch in.kind {
	case opInfer:
		outs = ls.infer(s, in)
	case opApply:
		outs = ls.apply(s, in)
	case opLoad:
		outs = ls.load(s, in)
	case opUnload:
		outs = ls.unload(s, in)
	case opBulkMember:
		return ls.bulkMember(s, in, out)
	case opStatus:
		if out.unknown || ls.statusMatches(s, out.status) {
			return []any{s}
		}
		return nil
	case opStatusOne:
		if ls.rowMatches(s, in.model, out.status[0]) {
			return []any{s}
		}
		return nil
	}
	if in.busy && in.model < linModels && s.m[in.model].reg {
		outs = append(outs, linOutcome{code: core.CodeServerBusy, next: s})
	}
	var next []any
	if out.unknown {
		next = append(next, s)
		for _, o := range outs {
			next = append(next, o.next)
		}
		return next
	}
	for _, o := range outs {
		if o.code != out.code {
			continue
		}
		if o.code == core.CodeOK && !ls.okMatches(o, in, out) {
			continue
		}
		next = append(next, o.next)
	}
	return next
}

func (ls *linSpec) okMatches(o linOutcome, in linInput, out linOutput) bool {
	m := o.next.m[in.model]
	c := &ls.cfgs[m.cfg]
	switch in.kind {
	case opInfer:
		return out.version == uint64(m.ver) && out.slot >= 0 && out.slot < c.slots
	}
	return true
}

func (ls *linSpec) infer(s linState, in linInput) []linOutcome {
	if in.model >= linModels || !s.m[in.model].reg {
		return []linOutcome{{code: core.CodeNotFound, next: s}}
	}
	m := s.m[in.model]
	if !m.loaded {
		if code := ls.cfgs[m.cfg].loadCode(); code != core.CodeOK {
			return []linOutcome{{code: code, next: s}}
		}
		s.m[in.model].loaded = true
	}
	if in.fail {
		return []linOutcome{{code: core.CodeBackend, next: s}}
	}
	return []linOutcome{{code: core.CodeOK, version: m.ver, next: s}}
}

// ensureLoad is a load manager on a registered model.
func (ls *linSpec) ensureLoad(s linState, i int) linOutcome {
	m := &s.m[i]
	if !m.loaded {
		if code := ls.cfgs[m.cfg].loadCode(); code != core.CodeOK {
			return linOutcome{code: code, next: s}
		}
		m.loaded = true
	}
	return linOutcome{code: core.CodeOK, version: m.ver, next: s}
}

func (ls *linSpec) load(s linState, in linInput) []linOutcome {
	if in.model >= linModels || !s.m[in.model].reg {
		return []linOutcome{{code: core.CodeNotFound, next: s}}
	}
	return []linOutcome{ls.ensureLoad(s, in.model)}
}

func (ls *linSpec) unload(s linState, in linInput) []linOutcome {
	if in.model >= linModels || !s.m[in.model].reg {
		return []linOutcome{{code: core.CodeNotFound, next: s}}
	}
	s.m[in.model].loaded = false
	return []linOutcome{{code: core.CodeOK, next: s}}
}

// apply is the contract's register/reconfigure decision tree (core.apply).
func (ls *linSpec) apply(s linState, in linInput) []linOutcome {
	n := &ls.cfgs[in.cfg]
	if n.invalid {
		return []linOutcome{{code: core.CodeInvalid, next: s}}
	}
	i := in.model
	m := &s.m[i]
	if !m.reg { // register, then load
		*m = linModel{reg: true, order: s.nreg, ver: 1, cfg: int8(in.cfg)}
		s.nreg++
		return []linOutcome{ls.ensureLoad(s, i)}
	}
	o := &ls.cfgs[m.cfg]
	replace := func() linOutcome {
		m.ver++
		m.cfg = int8(in.cfg)
		m.loaded = false
		return ls.ensureLoad(s, i)
	}
	switch {
	case sameConfig(n, o):
		return []linOutcome{ls.ensureLoad(s, i)}
	case sameSessions(n, o) && n.slots == o.slots:
		m.ver++
		m.cfg = int8(in.cfg)
		return []linOutcome{ls.ensureLoad(s, i)}
	case n.slots > 1 && m.loaded && sameSessions(n, o):
		if n.slots > o.capacity {
			return []linOutcome{{code: core.CodeInvalid, next: s}}
		}
		return []linOutcome{replace()}
	case n.slots > 1:
		if code := n.probeCode(); code != core.CodeOK {
			return []linOutcome{{code: code, next: s}}
		}
		return []linOutcome{replace()}
	}
	return []linOutcome{replace()}
}

func (ls *linSpec) bulkMember(s linState, in linInput, out linOutput) []any {
	reg := in.model < linModels && s.m[in.model].reg
	if out.unknown {
		if !reg {
			return []any{s}
		}
		n := s
		n.m[in.model].loaded = false
		return []any{s, n}
	}
	if out.found != reg {
		return nil
	}
	if reg {
		s.m[in.model].loaded = false
	}
	return []any{s}
}

func (ls *linSpec) statusMatches(s linState, st []linStatus) bool {
	if len(st) != int(s.nreg) {
		return false
	}
	for i := range linModels {
		if m := &s.m[i]; m.reg && !ls.rowMatches(s, i, st[m.order]) {
			return false
		}
	}
	return true
}

// rowMatches reports whether a status row shows model i's committed version
// with that version's slot count and memory.
func (ls *linSpec) rowMatches(s linState, i int, x linStatus) bool {
	m := &s.m[i]
	c := &ls.cfgs[m.cfg]
	return m.reg && x.id == linIDs[i] && x.version == uint64(m.ver) && x.slots == c.slots && x.mem == c.memoryMB
}

func (ls *linSpec) describeOp(in linInput, out linOutput) string {
	id := "z"
	if in.model < linModels {
		id = linIDs[in.model]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s(%s", opNames[in.kind], id)
	if in.kind == opApply {
		c := &ls.cfgs[in.cfg]
		fmt.Fprintf(&b, ", cfg%d slots=%d %s", in.cfg, c.slots, c.optionJSON)
		if c.invalid {
			b.WriteString(" invalid")
		}
	}
	if in.fail {
		b.WriteString(", fail")
	}
	b.WriteString(") -> ")
	switch {
	case out.unknown:
		b.WriteString("?")
	case in.kind == opStatus || in.kind == opStatusOne:
		for _, x := range out.status {
			fmt.Fprintf(&b, "%s:v%d/%d ", x.id, x.version, x.slots)
		}
	case in.kind == opBulkMember:
		fmt.Fprintf(&b, "found=%v", out.found)
	case out.code == core.CodeOK:
		fmt.Fprintf(&b, "ok v%d slot %d", out.version, out.slot)
	default:
		b.WriteString(out.code.String())
	}
	return b.String()
}

func (ls *linSpec) describeState(s linState) string {
	var b strings.Builder
	for i, m := range s.m {
		if m.reg {
			fmt.Fprintf(&b, "%s: v%d cfg%d loaded=%v; ", linIDs[i], m.ver, m.cfg, m.loaded)
		}
	}
	return b.String()
}
