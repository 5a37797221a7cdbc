package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/sluice-dev/sluice/backends"
)

// serial is the design of whisper.cpp's examples/server/server.cpp: one
// global mutex (whisper_mutex) held around every inference and around the
// /load handler that replaces the model, so every request of every model
// waits for whatever the engine does now, one thing at a time.
//
// What it imitates: the lock_guard on whisper_mutex at the top of the
// inference handler and of /load; one context (one session) per model; a
// load done inside the lock.
//
// What it leaves out, or gives it for free so that only the scheduling
// differs: whisper.cpp's server serves exactly one model (a /load replaces
// it); here it serves every model of the workload, each loaded on first use
// inside the lock, with the same residency room as Sluice (least recently
// used out first). It has no queue limit (cpp-httplib's worker threads and
// the accept backlog bound it only by the thread count), which this keeps.
// A model's slots are ignored: one session each, as one whisper_context.
type serial struct {
	eng  backends.Engine
	room int // most models resident at once; 0: no limit

	mu     sync.Mutex // whisper_mutex
	specs  models
	loaded map[string]*pool
	used   map[string]uint64 // model -> tick of its last use, for LRU eviction
	tick   uint64
	closed atomic.Bool
}

func newSerial(eng backends.Engine, specs models, room int) *serial {
	return &serial{eng: eng, room: room, specs: specs, loaded: map[string]*pool{}, used: map[string]uint64{}}
}

func (s *serial) infer(ctx context.Context, model string, input json.RawMessage) (answer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.ensure(ctx, model)
	if err != nil {
		return answer{}, err
	}
	return p.infer(ctx, "", input)
}

// ensure returns model's pool, loading it (and evicting the least recently
// used model when the room is full) under the global lock.
func (s *serial) ensure(ctx context.Context, model string) (*pool, error) {
	spec, err := s.specs.get(model)
	if err != nil {
		return nil, err
	}
	s.tick++
	s.used[model] = s.tick
	if p, ok := s.loaded[model]; ok {
		return p, nil
	}
	if s.room > 0 && len(s.loaded) >= s.room {
		victim, oldest := "", uint64(0)
		for id := range s.loaded {
			if victim == "" || s.used[id] < oldest {
				victim, oldest = id, s.used[id]
			}
		}
		s.loaded[victim].close()
		delete(s.loaded, victim)
	}
	spec.Slots = 1 // one whisper_context per model
	p, err := openPool(ctx, s.eng, spec)
	if err != nil {
		return nil, err
	}
	s.loaded[model] = p
	return p, nil
}

// apply is /load: under the global lock, free the old model and load the
// new config.
func (s *serial) apply(ctx context.Context, model string, spec backends.Spec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.specs.get(model)
	if err != nil {
		return err
	}
	spec.Version = old.Version + 1
	s.specs[model] = spec
	if p, ok := s.loaded[model]; ok {
		p.close()
		delete(s.loaded, model)
	}
	if _, err := s.ensure(ctx, model); err != nil {
		return fmt.Errorf("reload %s (v%s): %w", model, strconv.FormatUint(spec.Version, 10), err)
	}
	return nil
}

func (s *serial) close() {
	if s.closed.Swap(true) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, p := range s.loaded {
		p.close()
		delete(s.loaded, id)
	}
}
