package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/core"
)

// TraceReplay is what replaying a recorded runtime trace (`sluice serve
// --trace`, core/runtime's Options.Trace) on a fresh core.Machine showed:
// whether every event had exactly the effects it was recorded with, and
// per model the waits, server_busy refusals and loads of the replay.
type TraceReplay struct {
	Events, Effects int
	// Diverged is the first event whose replayed effects (or ticket) differ
	// from the recorded ones; nil when the replay agrees throughout.
	Diverged *Divergence
	Models   []ReplayModel
}

// Divergence is an event the replay answered otherwise than the trace.
type Divergence struct {
	Line     int    // the event's line in the trace
	Event    string // the event record
	Recorded []string
	Replayed []string
}

// ReplayModel is one model's figures in a replay: requests submitted and
// granted, the wait from submission to grant, server_busy refusals, loads
// started.
type ReplayModel struct {
	Model                     string
	Requests, Granted, Busy   int
	Loads                     int
	WaitP50, WaitP99, WaitMax time.Duration
	waits                     []int64
}

// ReplayTraceFile replays the trace at path under the options recorded
// beside it (<path without .ndjson>.options.json, written by the server
// and the runtime's test traces), or under opts when there are none.
func ReplayTraceFile(path string, opts core.Options) (*TraceReplay, error) {
	if b, err := os.ReadFile(strings.TrimSuffix(path, ".ndjson") + ".options.json"); err == nil {
		if err := json.Unmarshal(b, &opts); err != nil {
			return nil, fmt.Errorf("sim: replay: options: %w", err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sim: replay: %w", err)
	}
	defer f.Close()
	return ReplayTrace(f, opts)
}

// ReplayTrace replays the ndjson core.Record lines of r (an event line,
// then its effect lines) on a fresh machine with options opts and compares
// every event's effects, in order, with the recorded ones. Core is
// deterministic, so a trace of the same core under the same options
// replays exactly; a divergence is a trace that this core would not have
// written (another build, other options, or an edited trace).
func ReplayTrace(r io.Reader, opts core.Options) (*TraceReplay, error) {
	m, err := core.New(opts)
	if err != nil {
		return nil, fmt.Errorf("sim: replay: %w", err)
	}
	rep := &TraceReplay{}
	st := replayStats{models: map[string]*ReplayModel{}, submitted: map[core.Ticket]submit{}}
	// step replays one event and compares its effects with the recorded
	// ones; after a divergence it does nothing more.
	step := func(evLine int, re recEvent) error {
		if rep.Diverged != nil {
			return nil
		}
		ev := &re.ev
		recorded := make([]string, 0, len(re.effs))
		for _, rec := range re.effs {
			n, err := core.MarshalRecord(rec) // the same encoding as the replay's
			if err != nil {
				return fmt.Errorf("sim: replay: %w", err)
			}
			recorded = append(recorded, strings.TrimSpace(string(n)))
		}
		e, err := ev.Event()
		if err != nil {
			return fmt.Errorf("sim: replay: line %d: %w", evLine, err)
		}
		tk, _, aerr := apply(m, &e)
		defer m.Advance()
		var replayed []string
		effs := m.Effects() // none when core refused the event
		for _, x := range effs {
			b, err := core.MarshalRecord(m.EffectRecord(e.Now, x))
			if err != nil {
				return fmt.Errorf("sim: replay: %w", err)
			}
			replayed = append(replayed, strings.TrimSpace(string(b)))
		}
		rep.Events++
		rep.Effects += len(recorded)
		isSubmit := e.Kind == core.EvSubmitRequest || e.Kind == core.EvSubmitManager || e.Kind == core.EvSubmitBulkUnload
		if !slices.Equal(recorded, replayed) || (isSubmit && aerr == nil && uint64(tk) != ev.Ticket) {
			b, _ := core.MarshalRecord(*ev)
			if isSubmit && uint64(tk) != ev.Ticket {
				replayed = append(replayed, fmt.Sprintf("(ticket %d, recorded %d)", tk, ev.Ticket))
			}
			rep.Diverged = &Divergence{Line: evLine, Event: strings.TrimSpace(string(b)), Recorded: recorded, Replayed: replayed}
			return nil
		}
		st.event(m, &e, tk, effs)
		return nil
	}
	if err := eachEvent(r, "replay", step); err != nil {
		return nil, err
	}
	rep.Models = st.finish()
	return rep, nil
}

type submit struct {
	model string
	at    int64
}

// replayStats gathers the per-model figures of a replay.
type replayStats struct {
	models    map[string]*ReplayModel
	submitted map[core.Ticket]submit // requests not yet granted or refused
}

func (st *replayStats) model(id string) *ReplayModel {
	rm := st.models[id]
	if rm == nil {
		rm = &ReplayModel{Model: id}
		st.models[id] = rm
	}
	return rm
}

func (st *replayStats) event(m *core.Machine, ev *core.Event, tk core.Ticket, effs []core.Effect) {
	if ev.Kind == core.EvSubmitRequest && tk != 0 {
		st.model(ev.Model).Requests++
		st.submitted[tk] = submit{model: ev.Model, at: ev.Now}
	}
	for _, e := range effs {
		switch e.Kind {
		case core.EfGrant:
			if s, ok := st.submitted[e.Ticket]; ok {
				rm := st.model(s.model)
				rm.Granted++
				rm.waits = append(rm.waits, ev.Now-s.at)
				delete(st.submitted, e.Ticket)
			}
		case core.EfReject:
			if s, ok := st.submitted[e.Ticket]; ok {
				if e.Code == core.CodeServerBusy {
					st.model(s.model).Busy++
				}
				delete(st.submitted, e.Ticket)
			}
		case core.EfStartLoad:
			st.model(m.EffectRecord(ev.Now, e).Model).Loads++
		}
	}
}

func (st *replayStats) finish() []ReplayModel {
	var out []ReplayModel
	for _, rm := range st.models {
		slices.Sort(rm.waits)
		if n := len(rm.waits); n > 0 {
			rm.WaitP50 = time.Duration(rm.waits[(n-1)*50/100])
			rm.WaitP99 = time.Duration(rm.waits[(n-1)*99/100])
			rm.WaitMax = time.Duration(rm.waits[n-1])
		}
		rm.waits = nil
		out = append(out, *rm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

// Write prints the replay's verdict and per-model table.
func (t *TraceReplay) Write(w io.Writer) {
	if t.Diverged != nil {
		d := t.Diverged
		fmt.Fprintf(w, "replay: DIVERGED at line %d after %d events: %s\n", d.Line, t.Events-1, d.Event)
		fmt.Fprintf(w, "  recorded effects:\n")
		for _, x := range d.Recorded {
			fmt.Fprintf(w, "    %s\n", x)
		}
		fmt.Fprintf(w, "  replayed effects:\n")
		for _, x := range d.Replayed {
			fmt.Fprintf(w, "    %s\n", x)
		}
		return
	}
	fmt.Fprintf(w, "replay: agrees: %d events, %d effects, every effect as recorded\n", t.Events, t.Effects)
	writeModels(w, t.Models)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// replayMain is `sluice sim --replay PATH`: one trace, or every *.ndjson
// under a folder. It returns 1 when a trace diverges.
func replayMain(path string, quiet bool, stdout, stderr io.Writer) int {
	paths := []string{path}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		var err error
		if paths, err = traceFiles(path); err != nil {
			fmt.Fprintln(stderr, "sluice sim:", err)
			return 2
		}
	}
	agree, events := 0, 0
	for _, p := range paths {
		rep, err := ReplayTraceFile(p, core.Options{})
		if err != nil {
			fmt.Fprintln(stderr, "sluice sim:", err)
			return 2
		}
		events += rep.Events
		if rep.Diverged == nil {
			agree++
		}
		if !quiet || rep.Diverged != nil {
			fmt.Fprintf(stdout, "== %s\n", p)
			rep.Write(stdout)
		}
	}
	fmt.Fprintf(stdout, "replayed %d traces (%d events): %d agree, %d diverge\n", len(paths), events, agree, len(paths)-agree)
	if agree != len(paths) {
		return 1
	}
	return 0
}

// traceFiles lists the *.ndjson files under dir, sorted.
func traceFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ndjson") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sim: replay: %w", err)
	}
	sort.Strings(out)
	return out, nil
}
