package engines

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/whisper"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

// WhisperCheckpoint is the name of the synthetic Whisper checkpoint the
// matched-output check builds (no real Whisper weights can be obtained
// from the registries this project builds from; see backends/whisper/synth).
const WhisperCheckpoint = "whisper-synthetic-tiny"

// WhisperSpec builds the tiny synthetic Whisper model into a temporary
// folder (not the models root: a root is scanned whole, and a server
// without the whisper engine would refuse it) and returns its spec, which
// oversubscribes so 4 slots are checked on a machine with fewer cores, and
// a function removing the folder.
func WhisperSpec() (backends.Spec, func(), error) {
	if err := whisper.Available(); err != nil {
		return backends.Spec{}, nil, fmt.Errorf("whisper: %w (run make deps)", err)
	}
	root, err := os.MkdirTemp("", "sluice-whisper-matched")
	if err != nil {
		return backends.Spec{}, nil, err
	}
	done := func() { os.RemoveAll(root) }
	r, err := whisper.Recipe(WhisperCheckpoint, synth.Tiny, whisper.Seed, catalogue.MaxSlots)
	if err == nil {
		_, err = catalogue.Build(root, []catalogue.Recipe{r})
	}
	if err != nil {
		done()
		return backends.Spec{}, nil, err
	}
	return backends.Spec{Model: WhisperCheckpoint, Task: "asr", Engine: whisper.Name,
		Checkpoint: filepath.Join(root, WhisperCheckpoint), Options: []byte(`{"oversubscribe":true}`), Slots: 1}, done, nil
}

// WhisperMatched runs the matched-output check on the whisper engine with
// the tiny synthetic model (WhisperSpec). asr is the ASR inputs of Inputs.
func WhisperMatched(ctx context.Context, asr []backends.Request, slotCounts []int, rounds int) ([]Row, error) {
	spec, done, err := WhisperSpec()
	if err != nil {
		return nil, err
	}
	defer done()
	return Matched(ctx, whisper.New(), spec, WhisperCheckpoint, asr, slotCounts, rounds)
}

// WhisperHistory runs the history-independence check on the whisper engine
// with the tiny synthetic model (WhisperSpec).
func WhisperHistory(ctx context.Context, asr []backends.Request, o HistoryOptions) ([]HistoryRow, error) {
	spec, done, err := WhisperSpec()
	if err != nil {
		return nil, err
	}
	defer done()
	return History(ctx, whisper.New(), spec, WhisperCheckpoint, asr, o)
}
