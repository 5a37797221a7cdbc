package gen

import (
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
)

// Coverage counts the (state, action) pairs of the walk that the
// hand-written cases reach, by interpreting their steps on the spec.
type Coverage struct {
	Walk, Generated    int // pairs of the walk; pairs with a generated case
	Hand, HandInWalk   int // distinct pairs hand-written cases reach; of them, pairs of the walk
	Both, Union        int // walk pairs reached by both; by either
	Cases, Interpreted int // hand-written cases read; cases with at least one pair
	ByAction           map[string][3]int
}

// Print writes the coverage table.
func (c *Coverage) Print(w io.Writer) {
	fmt.Fprintf(w, "hand-written cases %d, of which interpreted on the spec %d\n", c.Cases, c.Interpreted)
	fmt.Fprintf(w, "| action | walk pairs | hand-written | generated |\n|---|---|---|---|\n")
	var keys []string
	for k := range c.ByAction {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := c.ByAction[k]
		fmt.Fprintf(w, "| %s | %d | %d | %d |\n", k, v[0], v[1], v[2])
	}
	fmt.Fprintf(w, "| all | %d | %d | %d |\n", c.Walk, c.HandInWalk, c.Generated)
	fmt.Fprintf(w, "walk pairs covered by both %d, by either %d; pairs hand-written cases reach outside the walk %d\n",
		c.Both, c.Union, c.Hand-c.HandInWalk)
}

type rawFile struct {
	Situations map[string][]map[string]any `yaml:"situations"`
	Cases      []struct {
		Name   string           `yaml:"name"`
		Server map[string]any   `yaml:"server"`
		Steps  []map[string]any `yaml:"steps"`
	} `yaml:"cases"`
}

// HandCoverage interprets every hand-written case (not gen.yaml) of the
// matrices in fsys on the spec, model symbol by model symbol, and counts
// the pairs it reaches. A case on a server of its own is left out (its
// options differ from the walk's); a model's interpretation stops at the
// first step the walk's alphabet cannot express (fixture options, gates on
// backend jobs, restarts, shutdown), so a count is a lower bound.
func HandCoverage(fsys fs.FS, r *Result) (*Coverage, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("gen: %w", err)
	}
	var files []rawFile
	situations := map[string][]map[string]any{}
	for _, n := range names {
		if n == "gen.yaml" {
			continue
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("gen: %w", err)
		}
		var f rawFile
		if err := yaml.Unmarshal(b, &f); err != nil {
			return nil, fmt.Errorf("gen: %s: %w", n, err)
		}
		for k, v := range f.Situations {
			situations[k] = v
		}
		files = append(files, f)
	}
	hand := map[string]bool{}
	cov := &Coverage{ByAction: map[string][3]int{}}
	for _, f := range files {
		for _, c := range f.Cases {
			cov.Cases++
			if c.Server != nil || len(c.Steps) == 0 {
				continue
			}
			steps := inline(c.Steps, situations, 0)
			got := 0
			for _, sym := range symbols(steps) {
				for _, pk := range interpret(steps, sym) {
					hand[pk] = true
					got++
				}
			}
			if got > 0 {
				cov.Interpreted++
			}
		}
	}
	for pk := range r.AllPairs {
		a := pk[strings.LastIndexByte(pk, '|')+1:]
		v := cov.ByAction[a]
		v[0]++
		if hand[pk] {
			v[1]++
		}
		if r.PairKeys[pk] {
			v[2]++
		}
		cov.ByAction[a] = v
		if hand[pk] && r.PairKeys[pk] {
			cov.Both++
		}
		if hand[pk] || r.PairKeys[pk] {
			cov.Union++
		}
	}
	cov.Walk, cov.Generated, cov.Hand = len(r.AllPairs), len(r.PairKeys), len(hand)
	for pk := range hand {
		if r.AllPairs[pk] {
			cov.HandInWalk++
		}
	}
	return cov, nil
}

func inline(steps []map[string]any, sit map[string][]map[string]any, depth int) []map[string]any {
	var out []map[string]any
	for _, s := range steps {
		if n, ok := s["situation"].(string); ok && depth < 8 {
			out = append(out, inline(sit[n], sit, depth+1)...)
			continue
		}
		out = append(out, s)
	}
	return out
}

// symbols returns the model symbols the case's put steps register.
func symbols(steps []map[string]any) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range steps {
		if a, ok := s["put"].(map[string]any); ok {
			if m, ok := a["model"].(string); ok && !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// interpret runs the steps that act on model sym through the spec and
// returns the pairs they take, until the first it cannot express.
func interpret(steps []map[string]any, sym string) []string {
	p := Params()
	t := abstract.NewConfigTable()
	s := &abstract.State{}
	gates := map[string]uint64{} // gate -> ticket of the request it holds
	calls := map[string]uint64{} // call name -> ticket
	var pairs []string
	var ticket uint64
	take := func(label string, ev abstract.Action) bool {
		key := string(s.AppendKey(nil, false)) + "|" + label
		ev.Model = strings.Replace(ev.Model, sym, model, 1)
		out, _, err := settle(s, ev, []string{model}, &p)
		if err != nil || out == nil {
			return false
		}
		pairs = append(pairs, key)
		s = out.State
		return true
	}
	submit := func(ev abstract.Action, as string) {
		ticket++
		ev.Ticket, ev.Timeout = ticket, core.NoTimeout
		if as != "" {
			calls[as] = ticket
		}
	}
	for _, st := range steps {
		for kind, arg := range st {
			a, _ := arg.(map[string]any)
			on := a != nil && a["model"] == sym
			as, _ := a["as"].(string)
			ok := true
			switch kind {
			case "put":
				if !on {
					continue
				}
				slots, _ := a["slots"].(int)
				if slots < 1 || slots > 2 || a["options"] != nil || a["engine"] != nil || a["task"] != nil ||
					a["raw"] != nil || a["max_queue"] != nil || a["admission_timeout_ms"] != nil || a["checkpoint"] != nil {
					return pairs
				}
				ev := abstract.Action{Kind: core.EvSubmitManager, Model: model, Op: core.OpApply, Cfg: config(t, slots)}
				submit(ev, as)
				ev.Ticket, ev.Timeout = ticket, core.NoTimeout
				ok = take(fmt.Sprintf("put%d", slots), ev)
			case "infer":
				if !on {
					continue
				}
				in, _ := a["input"].(map[string]any)
				if a["stream"] != nil || a["timeout_ms"] != nil || (in != nil && (len(in) != 1 || in["gate"] == nil)) {
					return pairs
				}
				ev := abstract.Action{Kind: core.EvSubmitRequest, Model: model}
				submit(ev, as)
				ev.Ticket, ev.Timeout = ticket, core.NoTimeout
				tk := ticket
				ok = take("infer", ev)
				if g, _ := in["gate"].(string); g != "" {
					gates[g] = tk
				} else if ok && as == "" && running(s, model) == tk {
					// A synchronous request without a gate runs and ends.
					ok = take("release", abstract.Action{Kind: core.EvRelease, Ticket: tk})
				}
			case "load", "unload":
				if !on {
					continue
				}
				op := map[string]core.Op{"load": core.OpLoad, "unload": core.OpUnload}[kind]
				ev := abstract.Action{Kind: core.EvSubmitManager, Model: model, Op: op}
				submit(ev, as)
				ev.Ticket, ev.Timeout = ticket, core.NoTimeout
				ok = take(kind, ev)
			case "http":
				path, _ := a["path"].(string)
				if !strings.Contains(path, "$"+sym) {
					continue
				}
				if a["method"] != "DELETE" || path != "/v1/models/$"+sym {
					return pairs
				}
				ev := abstract.Action{Kind: core.EvSubmitManager, Model: model, Op: core.OpUnregister}
				submit(ev, as)
				ev.Ticket, ev.Timeout = ticket, core.NoTimeout
				ok = take("delete", ev)
			case "bulk":
				ms, _ := a["models"].([]any)
				mine := false
				for _, m := range ms {
					mine = mine || m == sym
				}
				if !mine {
					continue
				}
				if len(ms) != 1 {
					return pairs
				}
				ev := abstract.Action{Kind: core.EvSubmitBulkUnload, Models: []string{model}}
				submit(ev, as)
				ev.Ticket = ticket
				ok = take("bulk", ev)
			case "open":
				g, _ := arg.(string)
				tk, mine := gates[g]
				if !mine {
					continue
				}
				ok = take("release", abstract.Action{Kind: core.EvRelease, Ticket: tk})
			case "disconnect":
				c, _ := arg.(string)
				tk, mine := calls[c]
				if !mine {
					continue
				}
				if tk != queuedRequest(s, model) {
					return pairs
				}
				ok = take("disconnect", abstract.Action{Kind: core.EvCancel, Ticket: tk, Reason: core.ReasonDisconnect})
			case "await", "await_model", "model", "absent", "list", "pending", "await_gate", "await_chunks", "log", "sessions":
				continue
			default:
				if strings.Contains(fmt.Sprint(arg), sym) {
					return pairs
				}
			}
			if !ok {
				return pairs
			}
		}
	}
	return pairs
}
