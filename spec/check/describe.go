package check

import (
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
	"github.com/sluice-dev/sluice/spec/coremodel"
	"github.com/sluice-dev/sluice/spec/env"
	"github.com/sluice-dev/sluice/spec/mc"
)

// Describe prints a spec state on one line per model, joined by "; ".
func Describe(s *abstract.State) string {
	var parts []string
	for i := range s.Models {
		md := &s.Models[i]
		var b strings.Builder
		if md.Gone {
			parts = append(parts, fmt.Sprintf("%s unregistered v%d", md.ID, md.Ver))
			continue
		}
		fmt.Fprintf(&b, "%s %s v%d slots=%d", md.ID, md.Life, md.Ver, md.Cfg.Slots)
		if md.Published {
			fmt.Fprintf(&b, " pool=v%d/%d", md.PoolVer, md.Sessions)
		}
		for _, h := range md.Holders {
			if h.Wait {
				fmt.Fprintf(&b, " wait:%s", env.TicketName(h.ID))
			} else {
				fmt.Fprintf(&b, " run:%s", env.TicketName(h.ID))
			}
		}
		if md.HasMgr {
			fmt.Fprintf(&b, " mgr:%s/%s", entryName(&md.Mgr), md.Step)
		}
		if md.Job != abstract.JNone {
			fmt.Fprintf(&b, " job=%s", md.Job)
		}
		if s.InLoaders(i) {
			b.WriteString(" in-loaders")
		}
		if md.Resident {
			fmt.Fprintf(&b, " resident")
		}
		if len(md.Queue) > 0 {
			b.WriteString(" queue=[")
			for k := range md.Queue {
				if k > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(entryName(&md.Queue[k]))
			}
			b.WriteByte(']')
		}
		parts = append(parts, b.String())
	}
	if len(s.Bulks) > 0 {
		var ids []string
		for _, bk := range s.Bulks {
			ids = append(ids, env.TicketName(bk.ID))
		}
		parts = append(parts, "bulks="+strings.Join(ids, ","))
	}
	if s.Shutdown {
		parts = append(parts, "shutting down")
	}
	if s.ShutdownSent {
		parts = append(parts, "shutdown complete")
	}
	return strings.Join(parts, "; ")
}

func entryName(e *abstract.Entry) string {
	switch e.Kind {
	case abstract.KReq:
		return "req:" + env.TicketName(e.ID)
	case abstract.KMember:
		return "unload(bulk " + env.TicketName(e.Bulk) + ")"
	}
	s := fmt.Sprintf("%s:%s", e.Op, env.TicketName(e.ID))
	if e.Cfg != nil {
		s += "(" + e.Cfg.String() + ")"
	}
	return s
}

// DescribeEffects prints spec effects readably.
func DescribeEffects(s *abstract.State, effs []abstract.Effect) string {
	if len(effs) == 0 {
		return "nothing"
	}
	var parts []string
	name := func(i int) string {
		if i >= 0 && i < len(s.Models) {
			return s.Models[i].ID
		}
		return fmt.Sprintf("model#%d", i)
	}
	for _, e := range effs {
		switch e.Kind {
		case core.EfGrant:
			parts = append(parts, fmt.Sprintf("Grant %s v%d", env.TicketName(e.Ticket), e.Ver))
		case core.EfReject:
			parts = append(parts, fmt.Sprintf("Reject %s %s", env.TicketName(e.Ticket), e.Code))
		case core.EfDone:
			parts = append(parts, fmt.Sprintf("Done %s", env.TicketName(e.Ticket)))
		case core.EfStartLoad:
			parts = append(parts, fmt.Sprintf("StartLoad %s v%d", name(e.Model), e.Ver))
		case core.EfStartClone:
			parts = append(parts, fmt.Sprintf("StartClone %s #%d", name(e.Model), e.Index))
		case core.EfStartProbe:
			parts = append(parts, fmt.Sprintf("StartProbe %s %s", name(e.Model), e.Cfg))
		case core.EfStartTeardown:
			parts = append(parts, fmt.Sprintf("StartTeardown %s sessions=%d cause=%s", name(e.Model), e.Sessions, e.Cause))
		default:
			parts = append(parts, e.Kind.String())
		}
	}
	return strings.Join(parts, ", ")
}

// Counterexample prints the steps of a core counterexample: each label, the
// effects the machine emitted, and the final state.
func Counterexample(b *env.Bound, mutants core.Mutants, res *mc.Result) string {
	var sb strings.Builder
	setups, err := b.Setups()
	if err != nil {
		return err.Error()
	}
	d, err := coremodel.Replay(b, mutants, setups[res.Root], nil)
	if err != nil {
		return err.Error()
	}
	fmt.Fprintf(&sb, "counterexample: %d steps after setup (%d setup events; initial state %d)\n", len(res.Path), len(setups[res.Root]), res.Root)
	fmt.Fprintf(&sb, "  initial state:\n%s", indent(d.M.Describe(), "    "))
	cycleAt := len(res.Path) - len(res.Cycle)
	for k, l := range res.Path {
		if len(res.Cycle) > 0 && k == cycleAt {
			sb.WriteString("  -- the cycle starts here --\n")
		}
		for n, x := range d.Micro(l) {
			r, err := d.ApplyMicro(x, n == 0)
			if err != nil {
				fmt.Fprintf(&sb, "  %2d. %s: %v\n", k+1, b.Describe(x), err)
				break
			}
			if n == 0 {
				fmt.Fprintf(&sb, "  %2d. %s\n", k+1, b.Describe(r.Label))
			} else {
				fmt.Fprintf(&sb, "      %s\n", b.Describe(r.Label))
			}
			if r.Stutter {
				sb.WriteString("        (refused: no change)\n")
			}
			for _, e := range d.Effects {
				if e.Ticket != 0 {
					fmt.Fprintf(&sb, "        -> %s (%s)\n", d.M.DescribeEffect(e), env.TicketName(uint64(e.Ticket)))
				} else {
					fmt.Fprintf(&sb, "        -> %s\n", d.M.DescribeEffect(e))
				}
			}
		}
	}
	fmt.Fprintf(&sb, "  final state:\n%s", indent(d.M.Describe(), "    "))
	fmt.Fprintf(&sb, "  violation: %s\n", res.Violation)
	return sb.String()
}

// SpecCounterexample prints the steps of a spec counterexample.
func SpecCounterexample(b *env.Bound, res *mc.Result) string {
	var sb strings.Builder
	setups, err := b.Setups()
	if err != nil {
		return err.Error()
	}
	p := b.Params()
	s := &abstract.State{}
	for _, l := range setups[res.Root] {
		outs, err := abstract.Step(s, b.Action(s, l), p)
		if err != nil {
			return err.Error()
		}
		s = outs[0].State
	}
	fmt.Fprintf(&sb, "counterexample: %d steps after setup (initial state %d)\n", len(res.Path), res.Root)
	fmt.Fprintf(&sb, "  initial state: %s\n", Describe(s))
	for k, l := range res.Path {
		outs, err := abstract.Step(s, b.Action(s, l), p)
		if err != nil || int(l.Alt) >= len(outs) {
			fmt.Fprintf(&sb, "  %2d. %s: cannot replay (%v)\n", k+1, b.Describe(l), err)
			break
		}
		o := outs[l.Alt]
		fmt.Fprintf(&sb, "  %2d. %s\n        -> %s\n", k+1, b.Describe(l), DescribeEffects(o.State, o.Effects))
		s = o.State
	}
	fmt.Fprintf(&sb, "  final state: %s\n", Describe(s))
	fmt.Fprintf(&sb, "  violation: %s\n", res.Violation)
	return sb.String()
}

func indent(s, pre string) string {
	if s == "" {
		return pre + "(no models)\n"
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return pre + strings.Join(lines, "\n"+pre) + "\n"
}
