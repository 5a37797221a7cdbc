package pocketsphinx

import (
	"errors"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"github.com/sluice-dev/sluice/backends"
)

// Cost bound and cancellation of a decode (CONTRACT.md E2, E3): an upload
// is decoded in pieces of pieceSamples (ps_process_raw without full_utt,
// the way the live path feeds the decoder), the request's context is
// checked between pieces, and the CPU time the decoding thread spends is
// checked against a budget derived from the audio's duration.

// pieceSamples is the audio one ps_process_raw call takes: 0.25 s at
// 16 kHz, 0.1-0.26 CPU-s on real speech (less on the hostile inputs
// measured), so work stops well within 1 s of the context ending.
const pieceSamples = SampleRate / 4

// Default cost options: the en-us checkpoint's measured cost on real
// speech is 0.4-1.03 CPU-s per audio second (jfk.wav, 11 s, warm session,
// on a 2-core machine shared with other builds, the high end under a load
// average of 17; sluice-ps-cost), and seeded noise at 1, 8 and 16 kHz,
// white or brown, 300 to 10000 peak, costs 0.06-0.22 in the same run. The
// default declares 1.0 and allows twice that, plus a floor so that short
// requests never meet it.
const (
	defaultCostPerSecond = 1.0 // CPU-s per audio second on real speech, declared
	defaultCostFactor    = 2   // budget = factor x cost per second x duration + floor
)

// costFloor is the budget every decode has whatever its duration (a
// variable so tests can remove it).
var costFloor = 5 * time.Second

// afterPiece, when set (tests), is called after each piece is decoded
// with the number decoded so far.
var afterPiece func(pieces int)

// ErrCostBudget is the error of a decode stopped by its cost budget.
var ErrCostBudget = errors.New("pocketsphinx: decoding passed its cost budget")

// budget is the CPU time a decode of seconds of audio may take.
func (c config) budget(seconds float64) time.Duration {
	return costFloor + time.Duration(c.costFactor*c.costPerSecond*seconds*float64(time.Second))
}

// threadCPU is the CPU time of the calling OS thread
// (CLOCK_THREAD_CPUTIME_ID); the caller holds runtime.LockOSThread so the
// native calls it measures run on that thread.
func threadCPU() time.Duration {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// meter measures a decode's CPU time on one locked OS thread.
type meter struct {
	start, budget time.Duration
}

// startMeter locks the goroutine to its thread and starts measuring;
// stop unlocks it.
func startMeter(budget time.Duration) *meter {
	runtime.LockOSThread()
	return &meter{start: threadCPU(), budget: budget}
}

func (m *meter) used() time.Duration { return threadCPU() - m.start }

// check returns ErrCostBudget, wrapped with the figures in an ErrInvalid
// naming the field file, once the budget is spent.
func (m *meter) check(seconds float64) error {
	if u := m.used(); u > m.budget {
		// A 400 naming file: the work is this audio's (E2).
		return backends.InvalidParam("file", "%w: %.1f CPU-s spent on %.1f s of audio (budget %.1f CPU-s; options cost_per_second and cost_factor)",
			ErrCostBudget, u.Seconds(), seconds, m.budget.Seconds())
	}
	return nil
}

func (m *meter) stop() { runtime.UnlockOSThread() }
