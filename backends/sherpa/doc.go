// Package sherpa serves sherpa-onnx's model families (k2-fsa/sherpa-onnx
// 1.13.8, the C API of npm's sherpa-onnx-linux-x64, loaded with purego).
package sherpa
