package backends

import "github.com/sluice-dev/sluice/backends/internal/memlimit"

// SetMemoryBudget tells the engines the server's --memory-budget (in
// megabytes; 0: none). An engine that checks a model file's memory need
// before loading it (whisper) uses it only when neither a cgroup memory
// limit nor the machine's physical memory can be read (see
// backends/internal/memlimit).
func SetMemoryBudget(mb int64) { memlimit.SetBudget(mb << 20) }
