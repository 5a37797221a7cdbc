// Package memlimit tells an engine how much memory the process may still
// use, so that a model file whose header implies more is refused with a
// clear error before a native library allocates it (an allocation failure
// inside ggml aborts the process).
//
// The limit is, in order: the cgroup's memory limit (v2 memory.max, v1
// memory.limit_in_bytes, for the cgroup /proc/self/cgroup names), else the
// machine's physical memory (MemTotal in /proc/meminfo), else the server's
// --memory-budget (SetBudget). What is available is that limit minus what
// the process has resident now (VmRSS, /proc/self/statm).
//
// Threading rule: every function is safe for concurrent use.
package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Source names where a limit came from.
type Source string

// The sources of a limit.
const (
	CgroupV2 Source = "cgroup v2 memory.max"
	CgroupV1 Source = "cgroup v1 memory.limit_in_bytes"
	Physical Source = "physical memory"
	Budget   Source = "--memory-budget"
	Override Source = "override"
	None     Source = "none"
)

// System is where the figures are read from; the zero value reads the
// real files (tests point it at a temporary tree).
type System struct {
	Root string // prefix of /sys/fs/cgroup and /proc paths; "" = "/"
}

var (
	mu       sync.Mutex
	budget   int64
	override int64
)

// SetBudget records the server's --memory-budget (bytes; 0: none), the
// last resort when neither a cgroup limit nor the physical memory can be
// read.
func SetBudget(bytes int64) {
	mu.Lock()
	budget = max(0, bytes)
	mu.Unlock()
}

// SetOverride makes Limit return bytes (tests and operators who know
// better than the cgroup; 0 removes it). restore puts the previous value
// back.
func SetOverride(bytes int64) (restore func()) {
	mu.Lock()
	prev := override
	override = max(0, bytes)
	mu.Unlock()
	return func() {
		mu.Lock()
		override = prev
		mu.Unlock()
	}
}

func (s System) path(p string) string {
	if s.Root == "" {
		return p
	}
	return filepath.Join(s.Root, p)
}

// Limit returns the bytes the process may use and where the figure came
// from; 0 and None when nothing is known.
func (s System) Limit() (int64, Source) {
	mu.Lock()
	o, b := override, budget
	mu.Unlock()
	if o > 0 {
		return o, Override
	}
	if n, src := s.cgroup(); n > 0 {
		return n, src
	}
	if n := s.physical(); n > 0 {
		return n, Physical
	}
	if b > 0 {
		return b, Budget
	}
	return 0, None
}

// noLimit is above any real limit: cgroup v1 writes "no limit" as a page
// multiple near 2^63.
const noLimit = 1 << 62

func (s System) cgroup() (int64, Source) {
	cg, err := os.ReadFile(s.path("/proc/self/cgroup"))
	if err != nil {
		return 0, None
	}
	for _, line := range strings.Split(string(cg), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			for _, p := range []string{filepath.Join("/sys/fs/cgroup", parts[2], "memory.max"), "/sys/fs/cgroup/memory.max"} {
				if n := readBytes(s.path(p)); n > 0 && n < noLimit {
					return n, CgroupV2
				}
			}
		case hasController(parts[1], "memory"):
			for _, p := range []string{filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"), "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
				if n := readBytes(s.path(p)); n > 0 && n < noLimit {
					return n, CgroupV1
				}
			}
		}
	}
	return 0, None
}

func hasController(list, c string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}

// readBytes reads a cgroup file holding a byte count ("max": none).
func readBytes(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func (s System) physical() int64 {
	f, err := os.Open(s.path("/proc/meminfo"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return n << 10
				}
			}
		}
	}
	return 0
}

// Resident returns the process's resident bytes (VmRSS), 0 if unknown.
func (s System) Resident() int64 {
	b, err := os.ReadFile(s.path("/proc/self/statm"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// Figures are one reading: the limit, its source, the resident bytes and
// what is left of the limit.
type Figures struct {
	Limit     int64
	Source    Source
	Resident  int64
	Available int64 // Limit - Resident, at least 0; -1 when no limit is known
}

// Read returns the figures now.
func (s System) Read() Figures {
	lim, src := s.Limit()
	f := Figures{Limit: lim, Source: src, Resident: s.Resident(), Available: -1}
	if lim > 0 {
		f.Available = max(0, lim-f.Resident)
	}
	return f
}

// Fits reports nil when need bytes fit in what is available, else an
// error naming both figures and the limit's source (what is the caller's:
// "model file x.bin"). No known limit fits everything.
func (s System) Fits(need int64, what string) error {
	f := s.Read()
	if f.Available < 0 || need <= f.Available {
		return nil
	}
	return fmt.Errorf("%s needs %s of memory, more than the %s this process may still use (%s limit %s, %s resident)",
		what, MB(need), MB(f.Available), f.Source, MB(f.Limit), MB(f.Resident))
}

// Fits is System{}.Fits: the real process's figures.
func Fits(need int64, what string) error { return System{}.Fits(need, what) }

// MB formats a byte count in megabytes (MiB) for messages.
func MB(n int64) string {
	return strconv.FormatInt((n+(1<<20)-1)>>20, 10) + " MB"
}
