package sherpa

import (
	"os"
	"syscall"
)

// sparse reports a file whose allocated blocks cover less than half of its
// size (and more than 1 MiB is missing): a hole-punched or truncate-grown
// file.
func sparse(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	alloc := sys.Blocks * 512
	return st.Size()-alloc > 1<<20 && alloc < st.Size()/2
}
