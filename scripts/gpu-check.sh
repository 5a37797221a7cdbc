#!/usr/bin/env bash
# gpu-check.sh: the whisper engine's CUDA check, one prepared run for a
# machine with an NVIDIA GPU (issue 15; CONTRACT.md's GPU-only cells stay U
# until it has run and its output is recorded).
#
#   scripts/gpu-check.sh            # from the repository root
#
# It carries nothing from the network: it needs this checkout with
# .deps/npm (make deps: whisper.cpp 1.9.1's source in nodejs-whisper), cmake
# and Go on the machine, plus nvidia-smi and nvcc. Steps:
#   1. nvidia-smi and nvcc --version, printed (no GPU or no nvcc: exit 2);
#   2. build whisper.cpp 1.9.1 with ggml-cuda for sm_90 only (the H200;
#      SLUICE_CUDA_ARCHS overrides; build.sh's backend "cuda", folder
#      ...-cuda) beside the CPU build, both with the CPU variants x64 and
#      haswell only and every core, so the build fits the device check's
#      10 minutes (its seconds are printed);
#   3. the matched-output check CPU against CUDA at 1, 2 and 4 slots on the
#      tiny and bench synthetic models (backends/whisper/cmd/whisper-gpucheck),
#      concurrent clients, byte-identical JSON required within each backend
#      and the CPU/CUDA texts compared (ggml's CUDA kernels round
#      differently, so the cross-backend line reports equality, it does not
#      fail on it);
#   4. requests/s at 1, 2 and 4 slots on CPU and on CUDA.
# Exit status: 0 when every within-backend row matched.
set -euo pipefail
cd "$(dirname "$0")/.."
NPM_PREFIX="${SLUICE_NPM_PREFIX:-.deps/npm}"
OUT_ROOT="${SLUICE_WHISPER_ROOT:-.deps/whisper}"

echo "== nvidia-smi"
command -v nvidia-smi >/dev/null || { echo "gpu-check: no nvidia-smi: not a GPU machine" >&2; exit 2; }
nvidia-smi || { echo "gpu-check: nvidia-smi failed" >&2; exit 2; }
echo "== nvcc --version"
if ! command -v nvcc >/dev/null; then
	if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; else
		echo "gpu-check: no nvcc (the CUDA toolkit): cannot build ggml-cuda.cu" >&2; exit 2
	fi
fi
nvcc --version
# ggml-cuda is a module the shim loads at run time; it needs the toolkit's
# libcudart and libcublas.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
	if [ -d "$d" ]; then export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
done

command -v cmake >/dev/null || { echo "gpu-check: no cmake" >&2; exit 2; }
export SLUICE_WHISPER_CPU_VARIANTS="${SLUICE_WHISPER_CPU_VARIANTS:-x64 haswell}"
export SLUICE_BUILD_JOBS="${SLUICE_BUILD_JOBS:-$(nproc)}"
echo "== build: whisper.cpp 1.9.1, CPU and CUDA (sm_${SLUICE_CUDA_ARCHS:-90})"
t0=$(date +%s)
cpu_dir="$(bash backends/whisper/shim/build.sh "$NPM_PREFIX" "$OUT_ROOT" cpu)"
t1=$(date +%s)
cuda_dir="$(bash backends/whisper/shim/build.sh "$NPM_PREFIX" "$OUT_ROOT" cuda)"
t2=$(date +%s)
echo "cpu:  $cpu_dir ($((t1 - t0)) s)"
echo "cuda: $cuda_dir ($((t2 - t1)) s)"

echo "== matched outputs and throughput, CPU then CUDA"
# A device machine may have no Go: SLUICE_GPUCHECK_BIN names a checker
# built elsewhere (CGO_ENABLED=0 go build ./backends/whisper/cmd/whisper-gpucheck).
check="${SLUICE_GPUCHECK_BIN:-}"
if [ -z "$check" ]; then
	go build -o bin/whisper-gpucheck ./backends/whisper/cmd/whisper-gpucheck
	check=./bin/whisper-gpucheck
fi
SLUICE_WHISPER_LIB="$cpu_dir/libsluice_whisper.so" "$check" -label cpu -out /tmp/whisper-cpu.json
SLUICE_WHISPER_LIB="$cuda_dir/libsluice_whisper.so" "$check" -label cuda -gpu -out /tmp/whisper-cuda.json
"$check" -compare /tmp/whisper-cpu.json,/tmp/whisper-cuda.json
