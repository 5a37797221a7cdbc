package registry

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Announcements (CONTRACT.md persist.version-continues): the runtime
// commits a reconfiguration's config_version and shows it (GET
// /v1/models, events) before the registry can record it. Were the record
// then to fail (a full disk) and the server restart, the model would come
// back at its old version, and the next change would give the shown
// version to another config. So a change that will commit a new version
// is written first as an intent: the record it will leave, at the version
// it will commit. Once the change is settled the intent is dropped (a
// change refused before its commit), or it is the record (a change that
// committed as announced: nothing more is written), or a record follows
// it (one that committed otherwise, its load failed). A start rolls an
// unsettled intent forward over an older record of its ID.

// announce writes the intent of the change p (prepared by the runtime:
// validated, its engine's options resolved), and returns it (nil: none
// needed or none possible). The intent is the record p's config will
// leave, aliases and voice map included, so that a change that commits as
// announced needs no second write, and a start that rolls it forward
// restores the config the runtime showed at that version. None is
// written without a state dir, for a config the runtime will find
// identical to the live one (no new version), for one whose names another
// model holds now (refused before any commit: an intent that a crash kept
// would otherwise come back at the next start beside the model holding the
// name), or while another Apply of p's ID is in flight (the version
// cannot be foretold; that change is recorded after its commit only, as
// before). Every call is paired with a settle.
func (g *Registry) announce(p runtime.Prepared) (*Model, error) {
	if g.store == nil {
		return nil, nil
	}
	id, cfg := p.ID(), p.Config()
	s := g.store
	s.mu.Lock()
	defer s.mu.Unlock()
	g.applying[id]++
	if g.applying[id] > 1 {
		return nil, nil
	}
	if g.rt.NamesTaken(p) != nil {
		return nil, nil // refused before any commit, unless the name is freed first: then recorded after its commit
	}
	m := recordOf(id, &cfg, 0, !cfg.RegisterOnly)
	var c change
	live, st, err := g.rt.ConfigOf(id)
	old, known := s.get(id)
	switch {
	case err == nil:
		cur := recordOf(id, &live, st.ConfigVersion, m.Loaded)
		if m.ConfigVersion = st.ConfigVersion; cur.equal(&m) {
			return nil, nil // the runtime commits nothing
		}
		m.ConfigVersion = st.ConfigVersion + 1
		if known && old.ConfigVersion < st.ConfigVersion {
			// A change committed and not recorded (its record failed):
			// recorded now, before the next one is announced.
			c.Models = append(c.Models, recordOf(id, &live, st.ConfigVersion, st.WantLoaded))
		}
	case known:
		m.ConfigVersion = old.ConfigVersion + 1 // its tombstone's, or a record the runtime lost with a failed delete
	case g.rt.Unregistered(id):
		return nil, nil // a tombstone that was never recorded: its version is the runtime's alone
	default:
		m.ConfigVersion = max(cfg.BaseVersion, 1)
	}
	if _, ok := s.intents[id]; ok {
		c.Settled = append(c.Settled, id) // one whose settling failed: this one replaces it
	}
	c.Intents = []Model{m}
	if err := s.commit(c); err != nil {
		g.done(id)
		return nil, &httpapi.Error{Status: http.StatusInternalServerError, Type: "internal_error",
			Message: "the change was not applied: it could not be made durable in --state-dir before going live; nothing changed",
			Err:     fmt.Errorf("announcing model %q at config_version %d: %w", id, m.ConfigVersion, err)}
	}
	return &m, nil
}

// done ends one Apply of id. Call with the store's mu held.
func (g *Registry) done(id string) {
	if g.applying[id]--; g.applying[id] <= 0 {
		delete(g.applying, id)
	}
}

// settle ends an Apply of id: with committed, its committed state is
// recorded as Record does, and the Apply's intent, if any, is settled in
// the same write. A change that committed exactly as announced needs no
// write: its intent is its record. One refused before its commit has its
// intent dropped.
func (g *Registry) settle(id string, intent *Model, committed bool) error {
	if g.store == nil {
		return nil
	}
	s := g.store
	s.mu.Lock()
	defer s.mu.Unlock()
	g.done(id)
	var c change
	if committed {
		c = g.recordChange(id)
	}
	if intent != nil {
		if cur, ok := s.intents[id]; ok && cur.equal(intent) {
			if len(c.Models) == 1 && c.Models[0].equal(intent) {
				// Committed as announced: the intent on disk is the record.
				s.put(*intent)
				delete(s.intents, id)
				return nil
			}
			if !slices.Contains(c.Settled, id) {
				c.Settled = append(c.Settled, id)
			}
		}
	}
	if len(c.Models) == 0 && len(c.Settled) == 0 {
		return nil
	}
	return s.commit(c)
}
