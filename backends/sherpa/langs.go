package sherpa

import (
	"fmt"
	"strings"
	"sync"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// maxLangs bounds the recognizers a slot keeps for languages other than
// its checkpoint's default one: sherpa-onnx sets SenseVoice's, Whisper's
// and Canary's language in the recognizer's config at creation, so a
// request in another language needs a recognizer of its own (each a copy
// of the weights; Check counts maxLangs of them per slot).
const maxLangs = 2

// langCache is one slot's recognizers for languages other than the
// default, least recently used first. A slot serves one request at a
// time; the mutex guards against Close racing a late Infer.
type langCache struct {
	mu   sync.Mutex
	recs []langRec
}

type langRec struct {
	lang string
	m    *model
}

// recognizer returns the slot's recognizer for lang: the default one, or
// one created for lang (the least recently used beyond maxLangs is
// destroyed). The answer depends on lang alone: a recognizer's output
// does not depend on what it decoded before.
func (s *session) recognizer(lang string) (*model, error) {
	if lang == s.m.cfg.opts.Language {
		return s.m, nil
	}
	lc := &s.langs
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for i, r := range lc.recs {
		if r.lang == lang {
			lc.recs = append(append(lc.recs[:i:i], lc.recs[i+1:]...), r)
			return r.m, nil
		}
	}
	c := s.m.cfg
	c.opts.Language = lang
	hook("language-recognizer")
	m, err := create(s.m.lib, c)
	if err != nil {
		return nil, fmt.Errorf("sherpa: a recognizer for language %s: %w", lang, err)
	}
	if len(lc.recs) >= maxLangs {
		lc.recs[0].m.release()
		lc.recs = append(lc.recs[:0:0], lc.recs[1:]...)
	}
	lc.recs = append(lc.recs, langRec{lang, m})
	return m, nil
}

// closeLangs destroys the slot's language recognizers.
func (s *session) closeLangs() {
	s.langs.mu.Lock()
	defer s.langs.mu.Unlock()
	for _, r := range s.langs.recs {
		r.m.release()
	}
	s.langs.recs = nil
}

// cachedLangs lists the languages the slot holds a recognizer for, least
// recently used first (tests).
func (s *session) cachedLangs() []string {
	s.langs.mu.Lock()
	defer s.langs.mu.Unlock()
	var out []string
	for _, r := range s.langs.recs {
		out = append(out, r.lang)
	}
	return out
}

// requestLanguage resolves a request's language against the model's: it
// returns the language the answer reports ("" where the model detects
// it: the answer then carries the detected one) and the one the
// recognizer must be created for. A model with an option language takes
// any of its declared languages (c.langs) per request; the others take
// the one language they transcribe.
func (c *config) requestLanguage(asked string) (answer, rec string, err error) {
	if len(c.langs) > 0 {
		rec = c.opts.Language
		if strings.TrimSpace(asked) != "" {
			if rec, err = audio.CheckLanguage(asked, c.langs); err != nil {
				return "", "", backends.InvalidParam("language", "sherpa: %v", err)
			}
		}
		if rec == "auto" {
			return "", rec, nil
		}
		return rec, rec, nil
	}
	l, err := audio.CheckLanguage(asked, []string{c.language()})
	if err != nil {
		return "", "", backends.InvalidParam("language", "sherpa: %v", err)
	}
	return l, "", nil
}
