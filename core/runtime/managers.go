package runtime

import "sync"

// Managers behind long leases (CONTRACT.md live.drain-unload). A live
// session holds one lease for minutes; a manager submitted on its model is
// a barrier that waits for every earlier lease, so the server has to learn
// that one is waiting to drain its sessions. WatchManagers tells it, with
// no record subscription and no polling: the core's rules are unchanged.

// managerWatch is the set of watches, by model ID. Its own mutex, never
// held with r.mu.
type managerWatch struct {
	mu   sync.Mutex
	subs map[string]map[*chan struct{}]struct{}
}

// WatchManagers returns a channel that is closed once a targeted manager
// (apply, load, unload, unregister) or a bulk unload naming model id is submitted
// after the call, and a stop function that forgets the watch (call it when
// done; it is safe to call more than once). A manager already queued
// before the call is seen in the model's status (QueuedManagers).
func (r *Runtime) WatchManagers(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	w := &r.mgrs
	w.mu.Lock()
	if w.subs == nil {
		w.subs = map[string]map[*chan struct{}]struct{}{}
	}
	set := w.subs[id]
	if set == nil {
		set = map[*chan struct{}]struct{}{}
		w.subs[id] = set
	}
	set[&ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if set, ok := w.subs[id]; ok {
			delete(set, &ch)
			if len(set) == 0 {
				delete(w.subs, id)
			}
		}
	}
}

// noteManagers wakes and forgets the watches of ids.
func (r *Runtime) noteManagers(ids ...string) {
	w := &r.mgrs
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.subs) == 0 {
		return
	}
	for _, id := range ids {
		for ch := range w.subs[id] {
			close(*ch)
		}
		delete(w.subs, id)
	}
}
