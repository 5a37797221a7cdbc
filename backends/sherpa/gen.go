package sherpa

import (
	"context"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/sluice-dev/sluice/backends/internal/native"
)

// generation is one TTS call in flight: the progress callback appends the
// library's audio pieces to it and stops the library (returns 0) once ctx
// has ended or onPiece failed.
type generation struct {
	ctx     context.Context
	onPiece func([]float32) error
	err     error
	stopped atomic.Bool
}

var (
	gensMu  sync.Mutex
	gens    = map[uintptr]*generation{}
	nextGen uintptr
)

func registerGen(g *generation) uintptr {
	gensMu.Lock()
	defer gensMu.Unlock()
	nextGen++
	gens[nextGen] = g
	return nextGen
}

func unregisterGen(key uintptr) {
	gensMu.Lock()
	delete(gens, key)
	gensMu.Unlock()
}

// progressCallback is SherpaOnnxGeneratedAudioProgressCallbackWithArg: the
// library calls it on its own thread (the generating one) with each batch
// of sentences it synthesised. Returning 0 stops the generation.
func progressCallback(samples uintptr, n int32, _ float32, arg uintptr) int32 {
	hook("tts-piece")
	gensMu.Lock()
	g := gens[arg]
	gensMu.Unlock()
	if g == nil || g.stopped.Load() {
		return 0
	}
	if g.ctx.Err() != nil {
		g.stopped.Store(true)
		return 0
	}
	if n > 0 && samples != 0 && g.onPiece != nil {
		piece := append([]float32(nil), unsafe.Slice((*float32)(native.Ptr(samples)), int(n))...)
		if err := g.onPiece(piece); err != nil {
			g.err = err
			g.stopped.Store(true)
			return 0
		}
	}
	if g.ctx.Err() != nil { // ended while the piece was handed on: no next sentence
		g.stopped.Store(true)
		return 0
	}
	return 1
}
