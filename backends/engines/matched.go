package engines

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/sluice-dev/sluice/backends"
)

// TimingFields are top-level JSON keys removed before comparing outputs:
// the contract's validation evidence compares responses exactly after
// removing only top-level execution timing. The engines emit none today; a
// field named here would be dropped.
var TimingFields = []string{"elapsed_ms", "timing", "latency_ms", "processing_ms"}

// Normalize returns the comparable bytes of an output: content type, JSON
// without timing fields, and binary data.
func Normalize(o backends.Output) []byte {
	var b bytes.Buffer
	b.WriteString(o.ContentType)
	b.WriteByte(0)
	js := o.JSON
	var obj map[string]json.RawMessage
	if len(js) > 0 && json.Unmarshal(js, &obj) == nil && obj != nil {
		for _, k := range TimingFields {
			delete(obj, k)
		}
		js, _ = json.Marshal(obj)
	}
	b.Write(js)
	b.WriteByte(0)
	b.Write(o.Data)
	return b.Bytes()
}

// Infer runs req on s; a streamed request's chunks (each as the engine
// emitted it, a newline after each) are its Output.Data, so a stream is
// compared byte for byte as a whole answer is.
func Infer(ctx context.Context, s backends.Session, req backends.Request) (backends.Output, error) {
	if !req.Stream {
		return s.Infer(ctx, req, nil)
	}
	var chunks []byte
	o, err := s.Infer(ctx, req, func(c json.RawMessage) error {
		chunks = append(append(chunks, c...), '\n')
		return nil
	})
	o.Data = append(chunks, o.Data...)
	return o, err
}

// Pool is an open pool of sessions for one spec.
type Pool struct {
	Sessions []backends.Session
	Capacity int
}

// OpenPool validates spec and opens spec.Slots sessions (primary plus
// clones), like the runtime does. A spec the engine refuses returns an
// error wrapping backends.ErrInvalid (Validate's, or a capacity below the
// slots).
func OpenPool(ctx context.Context, eng backends.Engine, spec backends.Spec) (*Pool, error) {
	if err := eng.Validate(spec); err != nil {
		return nil, err
	}
	primary, capacity, err := eng.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	p := &Pool{Sessions: []backends.Session{primary}, Capacity: capacity}
	if capacity < spec.Slots {
		p.Close(ctx)
		return nil, backends.Invalidf("capacity %d below %d slots", capacity, spec.Slots)
	}
	for i := 1; i < spec.Slots; i++ {
		s, err := primary.Clone(ctx, i)
		if err != nil {
			p.Close(ctx)
			return nil, err
		}
		p.Sessions = append(p.Sessions, s)
	}
	return p, nil
}

// Close closes every session.
func (p *Pool) Close(ctx context.Context) {
	for _, s := range p.Sessions {
		s.Close(ctx)
	}
	p.Sessions = nil
}

// Serve runs jobs (indices into reqs) with one client goroutine per
// session, each client serving on its own session and taking the next job
// from a shared queue, as a scheduler granting free slots would. It
// returns the normalised output of every job, in job order.
func (p *Pool) Serve(ctx context.Context, reqs []backends.Request, jobs []int) ([][]byte, error) {
	queue := make(chan int, len(jobs))
	for i := range jobs {
		queue <- i
	}
	close(queue)
	out := make([][]byte, len(jobs))
	errs := make([]error, len(p.Sessions))
	var wg sync.WaitGroup
	for k, s := range p.Sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range queue {
				o, err := Infer(ctx, s, reqs[jobs[i]])
				if err != nil {
					errs[k] = fmt.Errorf("session %d, request %s: %w", k, reqs[jobs[i]].ID, err)
					return
				}
				out[i] = Normalize(o)
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// Row is one line of the matched-output table.
type Row struct {
	Checkpoint string
	Engine     string
	Slots      int
	Requests   int   // requests compared
	Matched    int   // outputs identical to the capacity-1 reference
	Refused    error // the engine refused this slot count (ErrInvalid)
	Err        error // anything else that went wrong
}

// Status is the row's verdict: "ok", "MISMATCH", "refused" or "error".
func (r Row) Status() string {
	switch {
	case r.Err != nil:
		return "error"
	case r.Refused != nil:
		return "refused"
	case r.Matched != r.Requests:
		return "MISMATCH"
	}
	return "ok"
}

// Matched runs the matched-output check of spec for each slot count: the
// reference is a capacity-1 pool answering reqs once, in order; each row
// opens a fresh pool of that many slots and answers every request rounds
// times, in a rotated order, with as many concurrent clients as slots.
func Matched(ctx context.Context, eng backends.Engine, spec backends.Spec, name string, reqs []backends.Request, slotCounts []int, rounds int) ([]Row, error) {
	spec.Slots = 1
	ref, err := OpenPool(ctx, eng, spec)
	if err != nil {
		return nil, fmt.Errorf("%s: reference pool: %w", name, err)
	}
	seq := make([]int, len(reqs))
	for i := range seq {
		seq[i] = i
	}
	want, err := ref.Serve(ctx, reqs, seq)
	ref.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: reference run: %w", name, err)
	}
	var rows []Row
	for _, n := range slotCounts {
		row := Row{Checkpoint: name, Engine: eng.Name(), Slots: n}
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
		var jobs []int
		for r := range rounds {
			for i := range reqs {
				jobs = append(jobs, (len(reqs)-1-i+r)%len(reqs)) // reversed, rotated per round
			}
		}
		got, err := pool.Serve(ctx, reqs, jobs)
		pool.Close(ctx)
		row.Requests = len(jobs)
		if err != nil {
			row.Err = err
		}
		for i, g := range got {
			if g != nil && bytes.Equal(g, want[jobs[i]]) {
				row.Matched++
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}
