//go:build sluice_mutants

package core

// mutantsBuilt says that this build can switch planted bugs on
// (Options.Mutants). Only builds with the sluice_mutants tag can: the mutant
// runners (make mutants, sim-mutants, conformance-mutants, mutation).
const mutantsBuilt = true
