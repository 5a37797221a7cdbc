package engines

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/pocketsphinx"
)

// HistoryPair is a request eSpeak NG answered differently right after the
// other one (another comma pause, another length): the history check's
// TTS inputs carry both, so any engine with that kind of leak is caught.
var HistoryPair = [2]string{
	"Good, we can leave in ten minutes then.",
	"Sure, I will open it after the news.",
}

// HistoryInputs returns the history check's requests for a task: the
// standard ones plus others that differ in length and options, to be
// interleaved with them (TTS: HistoryPair, a longer two-sentence text, a
// slower and a resampled request; the other tasks: the standard inputs).
func HistoryInputs(in map[string][]backends.Request, task string) []backends.Request {
	reqs := append([]backends.Request(nil), in[task]...)
	if task != "tts" {
		return reqs
	}
	add := func(id string, r audio.TTSRequest) {
		b, _ := json.Marshal(r)
		reqs = append(reqs, backends.Request{ID: id, Input: b})
	}
	add("tts-before", audio.TTSRequest{Text: HistoryPair[0]})
	add("tts-after", audio.TTSRequest{Text: HistoryPair[1]})
	add("tts-long", audio.TTSRequest{Text: "Please remind me to water the plants on Saturday morning, before nine. Then read me the shopping list."})
	add("tts-slow", audio.TTSRequest{Text: HistoryPair[0], Speed: 0.8})
	add("tts-16k", audio.TTSRequest{Text: HistoryPair[1], SampleRate: 16000})
	// Ogg Opus: libsndfile draws a random stream serial per file, which
	// the encoder replaces (backends/internal/sndfile ogg.go).
	add("tts-opus", audio.TTSRequest{Text: HistoryPair[1], Format: "opus"})
	return reqs
}

// HistoryRow is one line of the history-independence table.
type HistoryRow struct {
	Checkpoint string
	Engine     string
	Slots      int
	Orders     int      // seeded shuffled orders served
	Requests   int      // answers compared
	Matched    int      // answers identical to the request's fresh answer
	Differs    []string // request IDs that differed at least once
	Refused    error    // the engine refused this slot count (ErrInvalid)
	Err        error    // anything else that went wrong
}

// Status is the row's verdict: "ok", "DIFFERS", "refused" or "error".
func (r HistoryRow) Status() string {
	switch {
	case r.Err != nil:
		return "error"
	case r.Refused != nil:
		return "refused"
	case r.Matched != r.Requests:
		return "DIFFERS"
	}
	return "ok"
}

// HistoryOptions sizes the history-independence check.
type HistoryOptions struct {
	_      struct{}
	Slots  []int  // slot counts, each checked with a fresh pool
	Orders int    // seeded shuffled orders each pool serves
	Seed   uint64 // seed of the shuffles
	// Fresh takes each request's reference answer from a pool opened for
	// it alone (nothing came before it); otherwise one fresh one-slot pool
	// answers all requests once in the given order (cheaper for engines
	// whose pools are slow to open: only the first answer has no history,
	// but a shuffle that changes an answer still differs from it).
	Fresh bool
}

// History runs the history-independence check of spec (contract E1): each
// request's reference answer comes from a fresh one-slot pool (see
// HistoryOptions.Fresh); then, for each slot count, one fresh pool serves
// o.Orders seeded shuffles of all requests (each a different order, so
// every request follows many others, on its own slot and after others'
// requests on other slots) with as many concurrent clients as slots, and
// every answer must equal the reference byte for byte (timing fields
// removed, see Normalize). A slot count the engine refuses is a refused
// row.
func History(ctx context.Context, eng backends.Engine, spec backends.Spec, name string, reqs []backends.Request, o HistoryOptions) ([]HistoryRow, error) {
	want, err := references(ctx, eng, spec, reqs, o.Fresh)
	if err != nil {
		return nil, fmt.Errorf("%s: reference answers: %w", name, err)
	}
	orders, seed, slotCounts := o.Orders, o.Seed, o.Slots
	var rows []HistoryRow
	for _, n := range slotCounts {
		row := HistoryRow{Checkpoint: name, Engine: eng.Name(), Slots: n, Orders: orders}
		spec.Slots = n
		pool, err := OpenPool(ctx, eng, spec)
		if errors.Is(err, backends.ErrInvalid) {
			row.Refused = err
			rows = append(rows, row)
			continue
		}
		if err != nil {
			row.Err = err
			rows = append(rows, row)
			continue
		}
		jobs := ShuffledJobs(len(reqs), orders, seed+uint64(n))
		got, err := pool.Serve(ctx, reqs, jobs)
		pool.Close(ctx)
		row.Requests, row.Err = len(jobs), err
		differs := map[string]bool{}
		for i, g := range got {
			if g != nil && bytes.Equal(g, want[jobs[i]]) {
				row.Matched++
			} else if id := reqs[jobs[i]].ID; !differs[id] {
				differs[id] = true
				row.Differs = append(row.Differs, id)
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// ShuffledJobs returns orders concatenated permutations of 0..n-1, each
// shuffled by a PCG seeded with seed and the order's index.
func ShuffledJobs(n, orders int, seed uint64) []int {
	var jobs []int
	for o := range orders {
		r := rand.New(rand.NewPCG(seed, uint64(o)))
		jobs = append(jobs, r.Perm(n)...)
	}
	return jobs
}

// references answers reqs at one slot: each from a pool of its own when
// fresh, else all from one pool in order.
func references(ctx context.Context, eng backends.Engine, spec backends.Spec, reqs []backends.Request, fresh bool) ([][]byte, error) {
	spec.Slots = 1
	seq := make([]int, len(reqs))
	for i := range seq {
		seq[i] = i
	}
	if !fresh {
		p, err := OpenPool(ctx, eng, spec)
		if err != nil {
			return nil, err
		}
		defer p.Close(ctx)
		return p.Serve(ctx, reqs, seq)
	}
	want := make([][]byte, len(reqs))
	for i := range reqs {
		p, err := OpenPool(ctx, eng, spec)
		if err != nil {
			return nil, err
		}
		out, err := p.Serve(ctx, reqs, seq[i:i+1])
		p.Close(ctx)
		if err != nil {
			return nil, err
		}
		want[i] = out[0]
	}
	return want, nil
}

// ShortHistory is the short form of the history check over a scanned root
// (the default test run and the conformance case engine.history): every
// checkpoint at 1, 2 and 4 slots, two orders, jfk.wav left out (11 s), a
// fresh reference per request except for pocketsphinx (one pool; its
// decoders take seconds to load). It returns every row and an error naming
// each row that is not as the checkpoint's slot ceiling says: refused
// above it, ok up to it.
func ShortHistory(ctx context.Context, cat *catalogue.Catalogue, reg backends.Registry, in map[string][]backends.Request) ([]HistoryRow, error) {
	var all []HistoryRow
	var errs []error
	for _, name := range cat.Names() {
		cp, _ := cat.Get(name)
		reqs := slices.DeleteFunc(HistoryInputs(in, cp.Task), func(r backends.Request) bool { return r.ID == "asr-jfk" })
		o := HistoryOptions{Slots: []int{1, 2, 4}, Orders: 2, Seed: 32, Fresh: cp.Engine != pocketsphinx.Name}
		rows, err := History(ctx, reg[cp.Engine], SpecFor(name, cp, 1), name, reqs, o)
		if err != nil {
			return all, err
		}
		for _, r := range rows {
			switch {
			case r.Slots > cp.Parallel.MaxSlots:
				if !errors.Is(r.Refused, backends.ErrInvalid) {
					errs = append(errs, fmt.Errorf("%s: %d slots not refused (%s)", name, r.Slots, r.Status()))
				}
			case r.Status() != "ok":
				errs = append(errs, fmt.Errorf("%s at %d slots: %s: %d/%d answers equal the fresh ones; differ: %v; err %v; refused %v",
					name, r.Slots, r.Status(), r.Matched, r.Requests, r.Differs, r.Err, r.Refused))
			}
		}
		all = append(all, rows...)
	}
	return all, errors.Join(errs...)
}
