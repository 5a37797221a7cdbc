package whisper

import (
	"encoding/json"
	"os"
	"sync"
	"sync/atomic"

	"github.com/sluice-dev/sluice/backends/audio"
)

// atomicStore sets a flag in C memory that the shim reads atomically.
func atomicStore(p *int32, v int32) { atomic.StoreInt32(p, v) }

func marshal(r audio.ASRResult) ([]byte, error) { return json.Marshal(r) }

// notify holds the decode-start pipes of NotifyDecodes, by model file.
var notify struct {
	mu  sync.Mutex
	fds map[string]*os.File
}

// NotifyDecodes makes every decode of the model file at path (a
// checkpoint's file, as the spec resolves it) write one byte to w when it
// begins, at the shim's first abort poll: the event "whisper is decoding
// now" for cancellation checks, without sleeping. restore removes it.
func NotifyDecodes(path string, w *os.File) (restore func()) {
	notify.mu.Lock()
	defer notify.mu.Unlock()
	if notify.fds == nil {
		notify.fds = map[string]*os.File{}
	}
	notify.fds[path] = w
	return func() {
		notify.mu.Lock()
		defer notify.mu.Unlock()
		delete(notify.fds, path)
	}
}

// notifyFD returns the decode-start descriptor for path, or fd.
func notifyFD(path string, fd int32) int32 {
	notify.mu.Lock()
	defer notify.mu.Unlock()
	if w := notify.fds[path]; w != nil {
		return int32(w.Fd())
	}
	return fd
}
