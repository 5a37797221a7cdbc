//go:build !sluice_mutants

package runtime

import (
	"log/slog"

	"github.com/sluice-dev/sluice/core"
)

// mutantsFromEnv is the no-op twin of mutants_on.go: a build without the
// sluice_mutants tag never switches planted bugs on, whatever the
// environment says.
func mutantsFromEnv(*slog.Logger) (core.Mutants, error) { return 0, nil }
