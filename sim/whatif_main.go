package sim

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sluice-dev/sluice/core"
)

// whatIfMain is `sluice sim --replay PATH` with what-if flags: for each
// trace, the per-model figures of the virtual-time replay under the
// recorded configuration, then under the changed one.
func whatIfMain(path string, w WhatIf, stdout, stderr io.Writer) int {
	paths := []string{path}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		var err error
		if paths, err = traceFiles(path); err != nil {
			fmt.Fprintln(stderr, "sluice sim:", err)
			return 2
		}
	}
	for _, p := range paths {
		base, err := WhatIfTraceFile(p, core.Options{}, WhatIf{})
		if err != nil {
			fmt.Fprintln(stderr, "sluice sim:", err)
			return 2
		}
		changed, err := WhatIfTraceFile(p, core.Options{}, w)
		if err != nil {
			fmt.Fprintln(stderr, "sluice sim:", err)
			return 2
		}
		fmt.Fprintf(stdout, "== %s\n", p)
		fmt.Fprintln(stdout, "as recorded (virtual time):")
		writeModels(stdout, base.Models)
		fmt.Fprintf(stdout, "what if %s:\n", w)
		writeModels(stdout, changed.Models)
	}
	return 0
}

// String names the changes as the flags that make them.
func (w WhatIf) String() string {
	var parts []string
	if w.Slots > 0 {
		parts = append(parts, fmt.Sprintf("--slots %d", w.Slots))
	}
	if w.MaxLoadedModels != nil {
		parts = append(parts, fmt.Sprintf("--max-loaded-models %d", *w.MaxLoadedModels))
	}
	if w.MemoryBudgetMB != nil {
		parts = append(parts, fmt.Sprintf("--memory-budget %d", *w.MemoryBudgetMB))
	}
	if w.AdmissionTimeout != nil {
		parts = append(parts, fmt.Sprintf("--admission-timeout %s", *w.AdmissionTimeout))
	}
	if len(parts) == 0 {
		return "nothing changed"
	}
	return strings.Join(parts, " ")
}

// writeModels prints the per-model table of a replay.
func writeModels(w io.Writer, models []ReplayModel) {
	fmt.Fprintf(w, "%-24s %8s %8s %6s %6s %12s %12s %12s\n", "model", "requests", "granted", "busy", "loads", "wait p50", "wait p99", "wait max")
	for _, rm := range models {
		fmt.Fprintf(w, "%-24s %8d %8d %6d %6d %12s %12s %12s\n", rm.Model, rm.Requests, rm.Granted, rm.Busy, rm.Loads,
			rm.WaitP50, rm.WaitP99, rm.WaitMax)
	}
}
