package conformance

import (
	"fmt"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/sluice-dev/sluice/core"
)

// The sequential model that porcupine checks HTTP histories against (the
// ideas of core/runtime's linmodel_test.go, over what the HTTP API shows).
// Each operation takes effect at one instant, as if alone:
//
//   - an inference on a registered model binds the committed config
//     version of that instant and runs on a slot below that config's slot
//     count; on an unloaded model it first loads the committed config,
//     which fails exactly as its fixture options say;
//   - PUT follows the contract's decision tree (validate, reuse the live
//     capacity or probe, retire, commit, load): a failure before the commit
//     keeps everything, one after it leaves the new version unloaded;
//   - unload and each member of a bulk unload clear residency; a bulk's
//     members are separate operations within the bulk's interval;
//   - status is one atomic snapshot: the history's models in registration
//     order, each with its committed version and slot count;
//   - server_busy (timeouts, full queues, overdue slots, residency) changes
//     nothing; a call whose client went away has an unknown outcome.

const linModels = 3

// linCfg is one model spec of a history's config table.
type linCfg struct {
	family     int // equal families have equal options: equal sessions
	slots      int
	capacity   int
	failLoad   bool
	failProbe  bool
	failClone  int
	admission  int // admission_timeout_ms, 0: not set
	maxQueue   int
	invalid    bool // refused by validation (slots 17)
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

type linModel struct {
	reg    bool
	order  int8
	ver    uint16
	cfg    int8
	loaded bool
}

// linState is comparable, so porcupine's default equality works.
type linState struct {
	m    [linModels]linModel
	nreg int8
}

type linKind uint8

const (
	linInfer linKind = iota + 1
	linApply
	linLoad
	linUnload
	linBulkMember
	linStatus
	linStatusOne
)

var linKindNames = [...]string{"", "infer", "put", "load", "unload", "bulk", "status", "status1"}

type linInput struct {
	kind  linKind
	model int // 0..2, or linModels for an unknown ID
	cfg   int
	fail  bool
}

type linRow struct {
	id      int
	version uint64
	slots   int
}

type linOutput struct {
	code    core.Code
	unknown bool
	version uint64
	slot    int
	found   bool
	rows    []linRow
}

type linSpec struct{ cfgs []linCfg }

type linOutcome struct {
	code core.Code
	next linState
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

func (ls *linSpec) step(s linState, in linInput, out linOutput) []any {
	var outs []linOutcome
	switch in.kind {
	case linInfer:
		outs = ls.infer(s, in)
	case linApply:
		outs = ls.apply(s, in)
	case linLoad:
		outs = ls.load(s, in)
	case linUnload:
		outs = ls.unload(s, in)
	case linBulkMember:
		return ls.bulkMember(s, in, out)
	case linStatus:
		if out.unknown || ls.statusMatches(s, out.rows) {
			return []any{s}
		}
		return nil
	case linStatusOne:
		if ls.rowMatches(s, in.model, out.rows[0]) {
			return []any{s}
		}
		return nil
	}
	// Any wait may be refused with server_busy, changing nothing: the
	// target's default admission timeout and residency are unknown here.
	if in.model < linModels && s.m[in.model].reg || in.kind == linApply {
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
		if o.code == core.CodeOK && in.kind == linInfer {
			m := o.next.m[in.model]
			if out.version != uint64(m.ver) || out.slot < 0 || out.slot >= ls.cfgs[m.cfg].slots {
				continue
			}
		}
		next = append(next, o.next)
	}
	return next
}

func (ls *linSpec) infer(s linState, in linInput) []linOutcome {
	if in.model >= linModels || !s.m[in.model].reg {
		return []linOutcome{{code: core.CodeNotFound, next: s}}
	}
	if !s.m[in.model].loaded {
		if code := ls.cfgs[s.m[in.model].cfg].loadCode(); code != core.CodeOK {
			return []linOutcome{{code: code, next: s}}
		}
		s.m[in.model].loaded = true
	}
	if in.fail {
		return []linOutcome{{code: core.CodeBackend, next: s}}
	}
	return []linOutcome{{code: core.CodeOK, next: s}}
}

func (ls *linSpec) ensureLoad(s linState, i int) linOutcome {
	m := &s.m[i]
	if !m.loaded {
		if code := ls.cfgs[m.cfg].loadCode(); code != core.CodeOK {
			return linOutcome{code: code, next: s}
		}
		m.loaded = true
	}
	return linOutcome{code: core.CodeOK, next: s}
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

func sameSessions(a, b *linCfg) bool { return a.family == b.family }

func sameConfig(a, b *linCfg) bool {
	return a.family == b.family && a.slots == b.slots && a.admission == b.admission && a.maxQueue == b.maxQueue
}

// apply is the contract's register/reconfigure decision tree.
func (ls *linSpec) apply(s linState, in linInput) []linOutcome {
	n := &ls.cfgs[in.cfg]
	if n.invalid {
		return []linOutcome{{code: core.CodeInvalid, next: s}}
	}
	i := in.model
	m := &s.m[i]
	if !m.reg {
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

func (ls *linSpec) statusMatches(s linState, rows []linRow) bool {
	if len(rows) != int(s.nreg) {
		return false
	}
	for i := range linModels {
		if m := &s.m[i]; m.reg && !ls.rowMatches(s, i, rows[m.order]) {
			return false
		}
	}
	return true
}

func (ls *linSpec) rowMatches(s linState, i int, x linRow) bool {
	m := &s.m[i]
	return m.reg && x.id == i && x.version == uint64(m.ver) && x.slots == ls.cfgs[m.cfg].slots
}

func (ls *linSpec) describeOp(in linInput, out linOutput) string {
	id := "z"
	if in.model < linModels {
		id = string(rune('a' + in.model))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s(%s", linKindNames[in.kind], id)
	if in.kind == linApply {
		c := &ls.cfgs[in.cfg]
		fmt.Fprintf(&b, ", cfg%d slots=%d %s", in.cfg, c.slots, c.optionJSON)
	}
	if in.fail {
		b.WriteString(", fail")
	}
	b.WriteString(") -> ")
	switch {
	case out.unknown:
		b.WriteString("?")
	case in.kind == linStatus || in.kind == linStatusOne:
		for _, x := range out.rows {
			fmt.Fprintf(&b, "%c:v%d/%d ", 'a'+x.id, x.version, x.slots)
		}
	case in.kind == linBulkMember:
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
			fmt.Fprintf(&b, "%c: v%d cfg%d loaded=%v; ", 'a'+i, m.ver, m.cfg, m.loaded)
		}
	}
	return b.String()
}
