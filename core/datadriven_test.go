package core

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestScenarios runs the datadriven scenarios under testdata/scenarios: each
// command is one or more events; the output is every effect they caused
// (tickets by name) and the machine's Describe. Regenerate the golden output
// with `go test ./core/ -run Scenarios -rewrite` and review the diff.
//
// Commands:
//
//	options max-loaded=N memory=MB idle=NS guard
//	register id=a slots=2 cap=4        apply + complete every job
//	apply id=a slots=3 [options=X] [name=t] [memory=MB] [max-queue=N]
//	request id=a name=r1 [timeout=NS]
//	manager id=a op=load|unload|unregister name=u1
//	bulk name=b1 models=a,b,ghost
//	release name=r1 [failed]
//	cancel name=r1 reason=timeout|disconnect
//	complete id=a kind=load|clone|probe|teardown [cap=4] [failed]
//	drain [cap=4]
//	tick [dt=NS]
//	shutdown
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		var h *harness
		names := map[string]Ticket{}
		byTicket := map[Ticket]string{}
		reset := func(o Options) {
			h = newHarness(t, o)
			h.now = 0
		}
		reset(Options{})
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			h.t = t
			mark := len(h.log)
			markRes := map[Ticket]bool{}
			for tk := range h.res {
				markRes[tk] = true
			}
			arg := func(k string) string {
				for _, a := range d.CmdArgs {
					if a.Key == k {
						if len(a.Vals) == 0 {
							return "true"
						}
						return strings.Join(a.Vals, ",")
					}
				}
				return ""
			}
			num := func(k string, def int64) int64 {
				if s := arg(k); s != "" {
					n, err := strconv.ParseInt(s, 10, 64)
					if err != nil {
						d.Fatalf(t, "%s: %v", k, err)
					}
					return n
				}
				return def
			}
			name := func(tk Ticket) {
				if n := arg("name"); n != "" {
					names[n] = tk
					byTicket[tk] = n
				}
			}
			conf := func() *Config {
				c := cfg(int(num("slots", 1)))
				if o := arg("options"); o != "" {
					c.Options = o
				}
				c.MemoryMB = num("memory", 100)
				c.MaxQueue = int(num("max-queue", 0))
				return c
			}
			switch d.Cmd {
			case "options":
				reset(Options{MaxLoadedModels: int(num("max-loaded", 0)), MemoryBudgetMB: num("memory", 0),
					IdleTimeout: num("idle", 0), SerializeColdLoads: arg("guard") != ""})
				return "ok\n"
			case "register":
				name(h.apply(arg("id"), conf()))
				h.completeAll(int(num("cap", 4)))
			case "apply":
				name(h.apply(arg("id"), conf()))
			case "request":
				name(h.requestT(arg("id"), num("timeout", NoTimeout)))
			case "manager":
				op := map[string]Op{"load": OpLoad, "unload": OpUnload, "unregister": OpUnregister}[arg("op")]
				name(h.manager(arg("id"), op))
			case "bulk":
				name(h.bulkUnload(strings.Split(arg("models"), ",")...))
			case "release":
				tk := names[arg("name")]
				for k, x := range h.run {
					if x == tk {
						h.run = append(h.run[:k], h.run[k+1:]...)
					}
				}
				if err := h.m.Release(h.tick(), tk, arg("failed") != ""); err != nil {
					return "error: " + err.Error() + "\n"
				}
				h.collect()
			case "cancel":
				r := map[string]Reason{"timeout": ReasonTimeout, "disconnect": ReasonDisconnect}[arg("reason")]
				ok, err := h.m.Cancel(h.tick(), names[arg("name")], r)
				h.collect()
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				if !ok {
					h.log = append(h.log, "(not cancelled)")
				}
			case "complete":
				kind := map[string]EffectKind{"load": EfStartLoad, "clone": EfStartClone, "probe": EfStartProbe, "teardown": EfStartTeardown}[arg("kind")]
				h.step(arg("id"), kind, int(num("cap", 4)), arg("failed") != "")
			case "drain":
				h.drain(int(num("cap", 4)))
			case "tick":
				h.now += num("dt", 1000)
				h.m.Tick(h.now)
				h.collect()
			case "shutdown":
				h.shutdown()
			default:
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			var b strings.Builder
			for _, l := range h.log[mark:] {
				fmt.Fprintf(&b, "> %s\n", l)
			}
			// Name the tickets that ended or were granted by this command.
			var ended []string
			for tk, e := range h.res {
				if markRes[tk] {
					continue
				}
				if n, ok := byTicket[tk]; ok {
					ended = append(ended, fmt.Sprintf("%s: %s", n, outcomeOf(e)))
				}
			}
			sort.Strings(ended)
			for _, l := range ended {
				fmt.Fprintf(&b, "= %s\n", l)
			}
			b.WriteString(h.m.Describe())
			return b.String()
		})
	})
}

func outcomeOf(e Effect) string {
	switch e.Kind {
	case EfGrant:
		return fmt.Sprintf("granted slot=%d v%d", e.Slot, e.Version)
	case EfReject:
		return "rejected " + e.Code.String()
	}
	return "done"
}
