package native

import (
	"sync"
)

// Native memory under load/unload churn (CONTRACT.md E5). The engines'
// libraries allocate with glibc's malloc from whatever OS thread the Go
// scheduler runs a call on, and glibc gives threads their own arenas (up
// to 8 per core), whose freed pages stay mapped; a model unloaded leaves
// its memory spread over arenas that later loads do not reuse. Open
// limits the arenas once per process (mallopt M_ARENA_MAX, arenaMax),
// keeps blocks of 128 KiB and more in their own mappings (M_MMAP_THRESHOLD,
// so a model's buffers go back to the system when freed), and the engines
// call TrimHeap after tearing a model down (malloc_trim(0): return the
// free pages of every arena to the system).

// arenaMax is the process's glibc malloc arena limit.
const arenaMax = 2

// glibc's mallopt parameters: M_ARENA_MAX, and M_MMAP_THRESHOLD, which
// set explicitly also turns off glibc's dynamic threshold (after a large
// mmapped block is freed glibc raises the threshold up to 32 MiB, and
// later model-sized buffers land in the heap, where they fragment).
const (
	mArenaMax      = -8
	mMmapThreshold = -3
	mmapThreshold  = 128 << 10 // glibc's initial default, kept fixed
)

var (
	mallocOnce sync.Once
	cMallopt   func(param, value int32) int32
	cTrim      func(pad uintptr) int32
)

// loadMalloc binds mallopt and malloc_trim and sets the arena limit; with
// another C library (no malloc_trim) it does nothing.
func loadMalloc() {
	mallocOnce.Do(func() {
		h, err := Open("the C library", "libc.so.6")
		if err != nil {
			return
		}
		if Bind(h, &cMallopt, "mallopt", &cTrim, "malloc_trim") != nil {
			cMallopt, cTrim = nil, nil
			return
		}
		cMallopt(mArenaMax, arenaMax)
		cMallopt(mMmapThreshold, mmapThreshold)
	})
}

// TrimHeap returns the C heap's free pages to the system (malloc_trim(0)).
// Engines call it after freeing a model's native objects.
func TrimHeap() {
	loadMalloc()
	if cTrim != nil {
		cTrim(0)
	}
}
