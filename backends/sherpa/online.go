package sherpa

import (
	"context"

	"github.com/sluice-dev/sluice/backends"
)

// live serves a live session (backends/live.go) on a streaming model.
func (m *model) live(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	return backends.Output{}, backends.Invalidf("sherpa: live sessions are not implemented yet")
}
