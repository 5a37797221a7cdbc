package main

import (
	"log/slog"
	"os"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/engines"
)

// realEngines returns the real engines `sluice serve` and `sluice run` serve
// besides the fixture (which --fixture adds; `sluice run` always has it):
// every engine whose native library loads on this machine. A missing
// library is logged and its engine left out, so the server still starts.
// SLUICE_ONNXRUNTIME names the ONNX Runtime library when it is not in the
// default place (.deps/npm, see `make deps`).
func realEngines() backends.Registry {
	reg := backends.Registry{}
	for name, e := range engines.Registry(engines.Config{ONNXRuntime: os.Getenv("SLUICE_ONNXRUNTIME")}) {
		if err := engines.Available(name); err != nil {
			slog.Info("engine not available", slog.String("engine", name), slog.Any("err", err))
			continue
		}
		reg[name] = e
	}
	return reg
}
