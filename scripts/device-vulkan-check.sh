#!/usr/bin/env bash
# device-vulkan-check.sh: whisper.cpp 1.9.1's Vulkan build, made on a machine
# without a GPU (backends/whisper/shim/build.sh ... vulkan: its SPIR-V
# shaders are compiled at build time, so the folder runs on any Vulkan
# driver), run on a device machine's own Vulkan driver. One prepared run,
# no Go and no network needed there:
#
#   scripts/device-vulkan-check.sh BUILD.tar.gz MODELS_DIR JFK.wav
#
# BUILD.tar.gz holds the build folder (tar -C .deps/whisper -czf ...
# 1.9.1-<hash>-vulkan); MODELS_DIR holds tiny.bin and bench.bin (go run
# ./scripts/whispervk/synth -dir MODELS_DIR); JFK.wav is whisper.cpp's sample.
# The run of 2026-12-04 used the earlier linked-in build, which carried
# whispervk-states in its folder; build.sh's folder does not, so STATES
# names scripts/whispervk/states.c built against it (as
# scripts/whisper-vulkan-check.sh builds it), run with -lib. GPUCHECK, when
# set, names backends/whisper/cmd/whisper-gpucheck built with
# CGO_ENABLED=0: the Go engine's matched outputs on the folder, without
# and with option gpu.
# Where the machine has no Vulkan loader, unpack Debian's libvulkan1 (and
# libglvnd's libraries, which NVIDIA's ICD needs) into / first: LOADER_DEBS
# names a folder of .deb files to unpack. For each model it prints, like
# make whisper-vulkan-check: whisper-cli CPU (-ng) against Vulkan (text,
# time, the device ggml chose), then scripts/whispervk/states.c on each
# backend (1, 2 and 4 states of one context at once, every answer against
# the sequential one). Exit status: non-zero when a run failed or an answer
# within a backend differed. The run of 2026-12-04 on an NVIDIA H200 is
# conformance/device-runs/2026-12-04-h200-vulkan.log.
set -u
tarball="${1:?build tarball}" models="${2:?models folder}" jfk="${3:?jfk.wav}"
if [ -n "${LOADER_DEBS:-}" ]; then
	for f in "$LOADER_DEBS"/*.deb; do dpkg -x "$f" /; done
	ldconfig
fi
for j in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
	if [ -f "$j" ]; then export VK_DRIVER_FILES="$j"; break; fi
done
echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-none}"
work="$(mktemp -d)"
tar -C "$work" -xzf "$tarball"
dir="$(ls -d "$work"/1.9.1-*-vulkan | head -1)"
head -5 "$dir/build.txt"
export GGML_VK_VISIBLE_DEVICES="${GGML_VK_VISIBLE_DEVICES:-0}"
states="$dir/whispervk-states"
lib=()
if [ ! -x "$states" ]; then
	states="${STATES:?the build folder has no whispervk-states: set STATES}"
	lib=(-lib "$dir")
	export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
out="$work/out"
mkdir -p "$out"
TIMEFORMAT='%R s wall, %U s user, %S s sys'
fail=0
for m in ${MODELS:-tiny bench}; do
	model="$models/$m.bin"
	echo "== whisper-cli jfk.wav model $m, 1 thread: CPU (-ng) vs Vulkan"
	for b in cpu vulkan; do
		flag=()
		[ $b = cpu ] && flag=(-ng)
		{ time "$dir/whisper-cli" -m "$model" -f "$jfk" -t 1 -l en -nt -bs 1 -bo 1 -nf "${flag[@]}" >"$out/cli-$m-$b.txt" 2>"$out/cli-$m-$b.log"; } 2>"$out/cli-$m-$b.time" ||
			{ echo "  $b failed"; tail -8 "$out/cli-$m-$b.log"; fail=1; continue; }
		echo "  $b: $(cat "$out/cli-$m-$b.time"); $(grep -m1 -oE 'whisper_backend_init_gpu: using [^ ]+ backend|no GPU found' "$out/cli-$m-$b.log"); $(grep -oE 'encode time = +[0-9.]+ ms' "$out/cli-$m-$b.log" | tr -s ' '); $(grep -oE 'decode time = +[0-9.]+ ms / +[0-9]+ runs' "$out/cli-$m-$b.log" | tr -s ' ')"
		echo "    text: $(tr -d '\n' <"$out/cli-$m-$b.txt" | cut -c1-100)"
	done
	[ "$m" = tiny ] && grep -m3 -E 'ggml_vulkan|Vulkan0' "$out/cli-$m-vulkan.log"
	if cmp -s "$out/cli-$m-cpu.txt" "$out/cli-$m-vulkan.txt"; then echo "  cli text: identical"; else echo "  cli text: differ"; fi
	echo "== states.c: one context, 1, 2, 4 states at once, model $m"
	d=4
	[ "$m" = tiny ] && d=8
	for b in cpu vulkan; do
		g=0
		[ $b = vulkan ] && g=1
		rc=0
		{ time "$states" "${lib[@]}" -m "$model" -f "$jfk" -gpu $g -n 1,2,4 -d $d -t 1 -out "$out/states-$m-$b.ref" >"$out/states-$m-$b.log" 2>&1 || rc=$?; } 2>"$out/states-$m-$b.time"
		echo "  $b: rc $rc, process $(cat "$out/states-$m-$b.time")"
		sed 's/^/    /' "$out/states-$m-$b.log" | grep -v -E '^    (whisper_|ggml_|load_backend)' | head -20
		[ $rc -eq 0 ] || fail=1
	done
	if cmp -s "$out/states-$m-cpu.ref" "$out/states-$m-vulkan.ref"; then
		echo "  library answers: CPU and Vulkan identical"
	else
		echo "  library answers differ:"
		diff "$out/states-$m-cpu.ref" "$out/states-$m-vulkan.ref" | head -6 | cut -c1-140
	fi
done
if [ -n "${GPUCHECK:-}" ]; then
	echo "== the Go engine on the folder (whisper-gpucheck): CPU, then Vulkan"
	SLUICE_WHISPER_LIB="$dir/libsluice_whisper.so" "$GPUCHECK" -label cpu -out "$out/engine-cpu.json" || fail=1
	SLUICE_WHISPER_LIB="$dir/libsluice_whisper.so" "$GPUCHECK" -label vulkan -gpu -out "$out/engine-vulkan.json" || fail=1
	"$GPUCHECK" -compare "$out/engine-cpu.json,$out/engine-vulkan.json" || true
fi
echo "fail=$fail"
rm -rf "$work"
exit $fail
