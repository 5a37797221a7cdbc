package catalogue

import (
	"fmt"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// EngineOptions is how an engine resolves a spec against its checkpoint:
// spec's task must be task, its checkpoint's manifest must name engine and
// task, and the manifest's options merged under spec's are decoded strictly
// into opts (an unknown field is an error). Errors name the engine; those
// of a mismatched spec are backends.ErrInvalid.
func EngineOptions(spec backends.Spec, engine, task string, opts any) (*Checkpoint, error) {
	if spec.Task != task {
		return nil, backends.Invalidf("%s: task %q, want %s", engine, spec.Task, task)
	}
	cp, err := Load(spec.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", engine, err)
	}
	if cp.Engine != engine || cp.Task != task {
		return nil, backends.Invalidf("%s: checkpoint %q is for engine %q task %q", engine, cp.Name, cp.Engine, cp.Task)
	}
	merged, err := MergeOptions(cp.Options, spec.Options)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", engine, err)
	}
	if err := audio.DecodeStrict(merged, opts); err != nil {
		return nil, fmt.Errorf("%s: options: %w", engine, err)
	}
	return cp, nil
}
