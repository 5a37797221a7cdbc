package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/whisper"
)

// opt holds the flags of the version comparison and its child processes.
var opt struct {
	baselineLib, types    string
	streams               int // -streams: first-delta tries (stream.go)
	childSlots            int
	childRoot, childModel string
}

// wire is a sample as a child prints it.
type wire struct {
	Shorts, Longs []float64
	WallNS        int64
	N             int
}

// childCmd runs this program again with the library at lib (the 1.5.0
// baseline: one process loads one libwhisper), for one Sluice row or (0
// slots) the cancellation figures.
func childCmd(lib, root, model string, slots int, npm string, extra ...string) *exec.Cmd {
	exe, _ := os.Executable()
	args := []string{"-child-slots", fmt.Sprint(max(1, slots)), "-child-root", root, "-child-model", model, "-npm", npm}
	if slots == 0 {
		args = append(args, "-long", "0", "-short", "0")
	}
	cmd := exec.Command(exe, append(args, extra...)...)
	cmd.Env = append(os.Environ(), "SLUICE_WHISPER_LIB="+lib)
	cmd.Stderr = os.Stderr
	return cmd
}

// benchChild runs one Sluice row in a child process on the library lib;
// the CPU is the child's rusage (its load generator included, as the
// in-process rows include theirs).
func benchChild(lib, root, model string, slots int, npm string, nLong, nShort int, longSec, shortSec float64, clients int) (sample, error) {
	cmd := childCmd(lib, root, model, slots, npm, "-long", fmt.Sprint(nLong), "-short", fmt.Sprint(nShort),
		"-long-seconds", fmt.Sprint(longSec), "-short-seconds", fmt.Sprint(shortSec), "-clients", fmt.Sprint(clients), "-cancels", "0")
	out, err := cmd.Output()
	if err != nil {
		return sample{}, fmt.Errorf("child: %w", err)
	}
	var w wire
	if err := json.Unmarshal(out, &w); err != nil {
		return sample{}, fmt.Errorf("child output %q: %w", out, err)
	}
	x := sample{shorts: w.Shorts, longs: w.Longs, wall: time.Duration(w.WallNS), n: w.N}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		x.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return x, nil
}

// child is the child process: one Sluice row printed as JSON, or with
// -long 0 -short 0 the cancellation figures as text.
func child(nLong, nShort int, longSec, shortSec float64, clients, cancels int, npm string) error {
	if err := whisper.Available(); err != nil {
		return err
	}
	jfk, err := os.ReadFile(catalogue.DefaultSources(npm).JFK())
	if err != nil {
		return err
	}
	speech, err := audio.ParseWAV(jfk)
	if err != nil {
		return err
	}
	if nLong == 0 && nShort == 0 {
		if err := measureCancel("whisper 1.5.0", filepath.Join(opt.childRoot, opt.childModel), speech.Samples, cancels); err != nil {
			return err
		}
		return measureHTTPCancel("whisper 1.5.0", opt.childRoot, speech.Samples, cancels)
	}
	x, err := benchSluice(opt.childRoot, opt.childModel, opt.childSlots, workload(speech.Samples, nLong, nShort, longSec, shortSec), clients)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(wire{Shorts: x.shorts, Longs: x.longs, WallNS: int64(x.wall), N: x.n})
}
