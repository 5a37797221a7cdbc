//go:build !sluice_mutants

package conformance

// buildTags are the tags of the cmd/sluice the tests build: none without
// the planted bugs.
const buildTags = ""
