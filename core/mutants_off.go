//go:build !sluice_mutants

package core

// mutantsBuilt says that this build can switch planted bugs on
// (Options.Mutants). This one cannot: every planted bug's branch is dead
// code the compiler removes, and New refuses Options.Mutants.
const mutantsBuilt = false
