#!/usr/bin/env bash
# whisper-opencl-check.sh (`make whisper-opencl-check`): the whisper
# engine's second compute path on any machine. It installs Debian's
# CLBlast and pocl (a CPU OpenCL driver) when missing, builds
# libwhisper.so with ggml's CLBlast matrix multiplication
# (SLUICE_WHISPER_BACKEND=opencl) beside the CPU build, and runs
# whisper-gpucheck on both: matched outputs at 1, 2 and 4 slots within each
# build, then CPU against OpenCL clip by clip, then requests/s, on the
# tiny synthetic model (MODELS=tiny,bench adds the bench model; pocl
# compiles CLBlast's kernels on first use, about 2 minutes on 2 busy cores).
set -euo pipefail
cd "$(dirname "$0")/.."
NPM_PREFIX="${SLUICE_NPM_PREFIX:-.deps/npm}"
OUT_ROOT="${SLUICE_WHISPER_ROOT:-.deps/whisper}"
SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
pkgs=(libclblast-dev pocl-opencl-icd ocl-icd-opencl-dev)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	"${SUDO[@]}" apt-get update
	DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
cpu_dir="$(bash backends/whisper/shim/build.sh "$NPM_PREFIX" "$OUT_ROOT")"
ocl_dir="$(SLUICE_WHISPER_BACKEND=opencl bash backends/whisper/shim/build.sh "$NPM_PREFIX" "$OUT_ROOT")"
mkdir -p bin out
go build -o bin/whisper-gpucheck ./backends/whisper/cmd/whisper-gpucheck
SLUICE_WHISPER_LIB="$cpu_dir/libwhisper.so" ./bin/whisper-gpucheck -label cpu -models "${MODELS:-tiny}" -out out/whisper-cpu.json
SLUICE_WHISPER_LIB="$ocl_dir/libwhisper.so" ./bin/whisper-gpucheck -label opencl -models "${MODELS:-tiny}" -out out/whisper-opencl.json
./bin/whisper-gpucheck -compare out/whisper-cpu.json,out/whisper-opencl.json
