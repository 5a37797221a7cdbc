//go:build sluice_mutants

package conformance

// buildTags are the tags of the cmd/sluice the tests build: with the planted
// bugs when the tests have them.
const buildTags = "sluice_mutants"
