package engines

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/pollctx"
)

// PollCtx is a context that ends at the n-th call of its Err method
// (backends/internal/pollctx): an engine that checks its context between
// pieces of work sees it end there, with no clock involved (contract
// engine.cancel).
type PollCtx = pollctx.Ctx

// NewPollCtx returns a PollCtx ending at the n-th Err call.
func NewPollCtx(n int) *PollCtx { return pollctx.New(n) }

// LongRequest is the cancellation check's request for a task: TTS, a
// text of about chars characters (several sentences); audio tasks, the
// standard inputs' first audio repeated to at least seconds (with a
// second of silence between copies).
func LongRequest(in map[string][]backends.Request, task string, chars int, seconds float64) (backends.Request, error) {
	if task == "tts" {
		text := strings.Repeat("The committee will review every application before the end of the month. ", chars/74+1)
		b, _ := json.Marshal(audio.TTSRequest{Text: text[:min(len(text), chars)]})
		return backends.Request{ID: "long", Input: b}, nil
	}
	if len(in[task]) == 0 {
		return backends.Request{}, fmt.Errorf("engines: no %s input", task)
	}
	a, err := audio.ParseWAV(in[task][0].Data)
	if err != nil {
		return backends.Request{}, err
	}
	var pcm []int16
	for float64(len(pcm)) < seconds*float64(a.Rate) {
		pcm = append(append(pcm, a.Samples...), make([]int16, a.Rate)...)
	}
	return backends.Request{ID: "long", Input: in[task][0].Input, Data: audio.WAV(a.Rate, pcm)}, nil
}

// CancelRow is one checkpoint's cancellation result.
type CancelRow struct {
	Checkpoint string
	Checks     int // context checks during the whole request
	CutAt      int // the check at which the cancelled run's context ended
}

// CancelCheck (contract engine.cancel) serves req three times on one
// session of spec: whole, counting its context checks (at least minChecks,
// spread through the work); cancelled at the middle check, which must end
// with the context's error rather than an answer; and whole again, which
// must give the first answer's bytes (a cancelled request leaves nothing
// behind).
func CancelCheck(ctx context.Context, eng backends.Engine, spec backends.Spec, name string, req backends.Request, minChecks int) (CancelRow, error) {
	row := CancelRow{Checkpoint: name}
	s, _, err := eng.Open(ctx, spec)
	if err != nil {
		return row, err
	}
	defer s.Close(ctx)
	probe := NewPollCtx(1 << 30)
	want, err := s.Infer(probe, req, nil)
	if err != nil {
		return row, fmt.Errorf("%s: whole request: %w", name, err)
	}
	row.Checks = probe.Calls()
	if row.Checks < minChecks {
		return row, fmt.Errorf("%s: %d context checks in the whole request, want at least %d", name, row.Checks, minChecks)
	}
	row.CutAt = row.Checks / 2
	if _, err := s.Infer(NewPollCtx(row.CutAt), req, nil); !errors.Is(err, context.Canceled) {
		return row, fmt.Errorf("%s: cancelled at check %d of %d: %v, want the context's error", name, row.CutAt, row.Checks, err)
	}
	got, err := s.Infer(ctx, req, nil)
	if err != nil {
		return row, fmt.Errorf("%s: after the cancel: %w", name, err)
	}
	if !bytes.Equal(Normalize(got), Normalize(want)) {
		return row, fmt.Errorf("%s: the answer after a cancelled request differs from the one before", name)
	}
	return row, nil
}

// ShortCancel runs CancelCheck on every checkpoint of cat (the default
// test run and the conformance case engine.cancel): TTS 1,500 characters
// (at least 8 checks: one per sentence), audio 20 s (at least 8).
func ShortCancel(ctx context.Context, cat *catalogue.Catalogue, reg backends.Registry, in map[string][]backends.Request) ([]CancelRow, error) {
	var rows []CancelRow
	var errs []error
	for _, name := range cat.Names() {
		cp, _ := cat.Get(name)
		req, err := LongRequest(in, cp.Task, 1500, 20)
		if err != nil {
			return rows, err
		}
		row, err := CancelCheck(ctx, reg[cp.Engine], SpecFor(name, cp, 1), name, req, 8)
		rows = append(rows, row)
		errs = append(errs, err)
	}
	return rows, errors.Join(errs...)
}
