package flite

import "strings"

// Test access for the external tests (http_test.go).

// MaxUnitWords and MaxToken are the unit bounds (units.go).
const (
	MaxUnitWords = maxUnitWords
	MaxToken     = maxToken
)

// UnitWords is a unit's estimated spoken words.
func UnitWords(unit string) int {
	w := 0
	for _, tok := range strings.Fields(unit) {
		w += tokenWords(tok)
	}
	return w
}

// SetHooks sets the unit and chunk hooks until the returned function
// clears them; set them before the requests they observe start, and clear
// them after every request ended.
func SetHooks(unit func(unit string), chunk func(chunks int)) (clear func()) {
	unitHook, chunkHook = unit, chunk
	return func() { unitHook, chunkHook = nil, nil }
}
