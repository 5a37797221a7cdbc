package conformance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/onnx"
	"github.com/sluice-dev/sluice/core/runtime"
)

// gatedBlob is a request Body that counts its reads and holds read number
// at until release is closed, telling reached when it got there: the
// point "the engine is decoding this upload" made observable.
type gatedBlob struct {
	r       *bytes.Reader
	at      int64
	reads   atomic.Int64
	reached chan struct{}
	release <-chan struct{}
}

func (b *gatedBlob) Size() int64 { return b.r.Size() }

func (b *gatedBlob) ReadAt(p []byte, off int64) (int, error) {
	if b.reads.Add(1) == b.at {
		close(b.reached)
		<-b.release
	}
	return b.r.ReadAt(p, off)
}

// checkDecodeCancel (audio.decode-cancel): a real VAD model (Silero on
// onnx, one slot) decodes a 60 s upload chunk by chunk; its caller goes
// away while the second 64 KiB chunk is read. Decoding stops before the
// next chunk (no further read), the request ends cancelled, and the slot
// is free: the next request runs at once. Skipped without the models root
// or the onnx runtime.
func checkDecodeCancel(ctx context.Context, rr *runtimeRun) (err error) {
	if err := checkModelsRoot(rr.modelsRoot); err != nil {
		return err
	}
	engines, err := realEngines([]string{onnx.Name})
	if err != nil {
		return err
	}
	rt, err := runtime.New(runtime.Options{Engines: engines, CheckInvariants: os.Getenv(runtime.MutantsEnv) == ""})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 4*rr.timeout)
		defer cancel()
		if serr := rt.Shutdown(sctx); serr != nil && err == nil {
			err = fmt.Errorf("shutdown: %w", serr)
		}
	}()
	id := "vad." + rr.tag
	spec := runtime.ModelSpec{Engine: onnx.Name, Task: "vad", Slots: 1, Checkpoint: filepath.Join(rr.modelsRoot, "silero-v5")}
	if _, err := rt.Apply(ctx, id, spec); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Reads: the first 12 bytes, the fmt chunk's header and body, the data
	// chunk's header, then one per 64 KiB chunk: read 6 is the second.
	const at = 6
	blob := &gatedBlob{r: bytes.NewReader(audio.WAV(44100, make([]int16, 60*44100))), at: at,
		reached: make(chan struct{}), release: rctx.Done()}
	done := make(chan error, 1)
	go func() {
		_, err := rt.Infer(rctx, id, backends.Request{Body: blob}, runtime.InferOptions{})
		done <- err
	}()
	if err := rr.await("the engine to read the upload's second chunk", blob.reached); err != nil {
		return err
	}
	if err := rr.cancelled("request", cancel, done); err != nil {
		return err
	}
	if n := blob.reads.Load(); n != at {
		return fmt.Errorf("%d reads of the upload, want %d: decoding went on after the caller left", n, at)
	}
	st, err := rt.StatusOf(id)
	if err != nil {
		return err
	}
	if st.ActiveSlots != 0 {
		return fmt.Errorf("%d active slots after the cancelled request, want 0", st.ActiveSlots)
	}
	if _, err := rt.Infer(ctx, id, backends.Request{Data: audio.WAV(16000, make([]int16, 16000))}, runtime.InferOptions{}); err != nil {
		return fmt.Errorf("the next request: %w", err)
	}
	return nil
}
