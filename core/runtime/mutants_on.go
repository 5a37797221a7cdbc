//go:build sluice_mutants

package runtime

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/sluice-dev/sluice/core"
)

// mutantsFromEnv reads the planted bugs MutantsEnv switches on. Only builds
// with the sluice_mutants tag have it; mutants_off.go is its no-op twin.
func mutantsFromEnv(log *slog.Logger) (core.Mutants, error) {
	v := os.Getenv(MutantsEnv)
	if v == "" {
		return 0, nil
	}
	mu, err := ParseMutants(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", MutantsEnv, err)
	}
	if mu != 0 {
		log.Warn("planted scheduler bugs switched on: this build is for checking the checks, never for serving", slog.String("mutants", mu.String()))
	}
	return mu, nil
}
