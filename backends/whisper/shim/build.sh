#!/usr/bin/env bash
# build.sh builds whisper.cpp 1.9.1 (libwhisper and ggml) from the source
# the npm package nodejs-whisper@0.3.1 ships (cpp/whisper.cpp), with
# Debian's cmake, gcc and g++, together with Sluice's shim (shim.c beside
# this script, as libsluice_whisper.so) and whisper.cpp's own quantize tool
# (make models writes the quantized synthetic models with it). No cgo: the
# Go side loads libsluice_whisper.so with purego.
#
#   build.sh NPM_PREFIX OUT_ROOT [BACKEND] [server]
#
# BACKEND is cpu (the default, or $SLUICE_WHISPER_BACKEND), vulkan or
# cuda; it writes OUT_ROOT/<id>/, where <id> is
# "1.9.1-<hash of shim.c, this script and the CPU variant list>-<BACKEND>"
# (backends/whisper/lib.go computes the same name).
#
# CPU: ggml's runtime feature dispatch (GGML_BACKEND_DL with
# GGML_CPU_ALL_VARIANTS): the CPU backend is built as several modules
# (libggml-cpu-<variant>.so), and the shim loads the folder with
# ggml_backend_load_all_from_path, which scores every variant against the
# running CPU (cpuid) and keeps the best one this CPU can execute. So one
# folder serves any x86-64 machine. Only the variants in
# SLUICE_WHISPER_CPU_VARIANTS are compiled (default "x64 haswell
# skylakex": any x86-64, AVX2, AVX-512; each variant is about 25 s of
# CPU on this machine), because the full list is 13 compilations of ggml-cpu
# (the other names: sse42 sandybridge ivybridge piledriver cannonlake
# cascadelake icelake cooperlake zen4 alderlake sapphirerapids). The
# variant list is part of <id>'s hash.
#
# Two fixes to whisper.cpp 1.9.1, applied to a copy of the source:
#  - the first decoder's random generator (used when temperature > 0) is
#    seeded once per whisper_state, the others at every whisper_full call,
#    so a sampled answer depended on the state's earlier requests. The copy
#    reseeds it (std::mt19937(0)) at every call, as the others are
#    (std::mt19937(j)): the sampling seed of decoder j is j, for every
#    request.
#  - ggml_conv_1d always asks im2col for f16 output, and the CPU's f16
#    im2col asserts an f16 kernel, so an f32 model file (f32 convolution
#    kernels) aborted the process at its first decode (GGML_ASSERT in
#    ggml-cpu/ops.cpp, found by backends/whisper's TestEveryTypeLoads).
#    The copy asks for f32 output when the kernel is f32.
#  - the encoder and decoder graphs run through a backend scheduler whose
#    backends never get whisper_full's abort callback: it is polled only
#    after a whole encoder pass or decoder step (seconds for a large model
#    on a CPU), not between graph nodes as 1.5.0 did. The copy adds
#    sluice_whisper_set_abort (a thread-local callback the shim sets for
#    each call) and gives it to every backend before each scheduled graph,
#    so a cancelled request stops within one graph node again.
#
# Idempotent: an existing OUT_ROOT/<id>/libsluice_whisper.so is kept; a
# build goes to a temporary folder renamed into place, so an interrupted
# build leaves nothing under the final name. With "server" it also builds
# whisper.cpp's own examples/server (whisper-server) for make bench-whisper.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
npm="${1:?npm prefix}" out_root="${2:?output root}"
backend="${3:-${SLUICE_WHISPER_BACKEND:-cpu}}"
what="${4:-lib}"
case "$backend" in
lib | server) what="$backend" backend="${SLUICE_WHISPER_BACKEND:-cpu}" ;;
esac
src="$npm/node_modules/nodejs-whisper/cpp/whisper.cpp"
for f in CMakeLists.txt src/whisper.cpp include/whisper.h ggml/CMakeLists.txt examples/quantize/quantize.cpp; do
	[ -f "$src/$f" ] || { echo "whisper build: $src/$f missing (make deps installs nodejs-whisper@0.3.1)" >&2; exit 1; }
done
grep -q 'project("whisper.cpp" VERSION 1.9.1)' "$src/CMakeLists.txt" || { echo "whisper build: $src is not whisper.cpp 1.9.1" >&2; exit 1; }
command -v cmake >/dev/null || { echo "whisper build: cmake missing (make deps installs Debian's)" >&2; exit 1; }

variants="${SLUICE_WHISPER_CPU_VARIANTS:-x64 haswell skylakex}"
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON
	-DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DGGML_CCACHE=OFF -DWHISPER_BUILD_TESTS=OFF -DWHISPER_BUILD_EXAMPLES=ON
	-DWHISPER_BUILD_SERVER=ON -DWHISPER_SDL2=OFF -DWHISPER_CURL=OFF
	-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN')
targets=(ggml-base)
for v in $variants; do targets+=("ggml-cpu-$v"); done
case "$backend" in
cpu) ;;
vulkan)
	# ggml-vulkan needs glslc and the Vulkan headers (Debian glslc,
	# libvulkan-dev); see scripts/engine-deps.sh.
	cmake_args+=(-DGGML_VULKAN=ON) targets+=(ggml-vulkan) ;;
cuda)
	# The H200 only (sm_90): one architecture keeps the build inside the
	# device check's 10 minutes (scripts/gpu-check.sh). Without ggml's
	# FlashAttention kernels (most of ggml-cuda's template instances): the
	# engine decodes without flash attention (shim.c's load parameters).
	cmake_args+=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${SLUICE_CUDA_ARCHS:-90}" -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF) targets+=(ggml-cuda) ;;
*) echo "whisper build: backend $backend is not cpu, vulkan or cuda" >&2; exit 1 ;;
esac

hash="$( (cat "$here/shim.c" "$here/build.sh"; echo "$variants") | sha256sum | cut -c1-12)"
id="1.9.1-$hash-$backend"
dst="$out_root/$id"
jobs="${SLUICE_BUILD_JOBS:-$(nproc)}"

tmps=()
trap 'rm -rf "${tmps[@]}"' EXIT
mkdir -p "$out_root"

if [ ! -f "$dst/libsluice_whisper.so" ]; then
	tmp="$(mktemp -d "$out_root/.tmp.XXXXXX")"
	tmps+=("$tmp")
	echo "whisper build: whisper.cpp 1.9.1 for $id (CPU variants: $variants)" >&2
	start=$(date +%s)
	cp -r "$src" "$tmp/src"
	chmod -R u+w "$tmp/src"
	f="$tmp/src/src/whisper.cpp"
	anchor='    // the accumulated text context split into static (prompt_past0) and dynamic (prompt_past1)'
	grep -qxF "$anchor" "$f" || { echo "whisper build: the reseed fix's anchor is not in $f" >&2; exit 1; }
	sed -i "s|^$anchor\$|    state->decoders[0].rng = std::mt19937(0); // sluice: reseeded per call (build.sh)\n&|" "$f"
	[ "$(grep -c 'sluice: reseeded per call' "$f")" = 1 ] || { echo "whisper build: the reseed fix did not apply" >&2; exit 1; }
	helper='    const bool t = (ggml_backend_sched_graph_compute(sched, graph) == GGML_STATUS_SUCCESS);'
	[ "$(grep -cxF "$helper" "$f")" = 1 ] && [ "$(grep -cx '// ggml helpers' "$f")" = 1 ] ||
		{ echo "whisper build: the abort fix's anchors are not in $f once" >&2; exit 1; }
	sed -i 's|^// ggml helpers$|// sluice: the abort callback of the calling thread'"'"'s whisper call (build.sh)\nstatic thread_local ggml_abort_callback sluice_abort_cb = nullptr;\nstatic thread_local void * sluice_abort_data = nullptr;\nextern "C" WHISPER_API void sluice_whisper_set_abort(ggml_abort_callback cb, void * data) { sluice_abort_cb = cb; sluice_abort_data = data; }\n\n&|' "$f"
	sed -i 's|^    const bool t = (ggml_backend_sched_graph_compute(sched, graph) == GGML_STATUS_SUCCESS);$|    for (int i = 0; i < ggml_backend_sched_get_n_backends(sched); ++i) { // sluice: abort between nodes (build.sh)\n        ggml_backend_t b = ggml_backend_sched_get_backend(sched, i);\n        ggml_backend_dev_t d = ggml_backend_get_device(b);\n        ggml_backend_reg_t r = d ? ggml_backend_dev_backend_reg(d) : nullptr;\n        auto * fn = r ? (ggml_backend_set_abort_callback_t) ggml_backend_reg_get_proc_address(r, "ggml_backend_set_abort_callback") : nullptr;\n        if (fn) { fn(b, sluice_abort_cb, sluice_abort_data); }\n    }\n&|' "$f"
	[ "$(grep -c 'sluice: abort between nodes' "$f")" = 1 ] && [ "$(grep -c 'sluice_whisper_set_abort' "$f")" = 1 ] ||
		{ echo "whisper build: the abort fix did not apply" >&2; exit 1; }
	g="$tmp/src/ggml/src/ggml.c"
	conv='struct ggml_tensor * im2col = ggml_im2col(ctx, a, b, s0, 0, p0, 0, d0, 0, false, GGML_TYPE_F16); // [N, OL, IC * K]'
	[ "$(grep -cF "$conv" "$g")" = 1 ] || { echo "whisper build: the conv fix's anchor is not in $g once" >&2; exit 1; }
	sed -i 's|ggml_im2col(ctx, a, b, s0, 0, p0, 0, d0, 0, false, GGML_TYPE_F16); // \[N, OL, IC \* K\]|ggml_im2col(ctx, a, b, s0, 0, p0, 0, d0, 0, false, a->type == GGML_TYPE_F32 ? GGML_TYPE_F32 : GGML_TYPE_F16); // sluice: f32 kernels (build.sh)|' "$g"
	[ "$(grep -c 'sluice: f32 kernels' "$g")" = 1 ] || { echo "whisper build: the conv fix did not apply" >&2; exit 1; }
	cmake -S "$tmp/src" -B "$tmp/build" "${cmake_args[@]}" >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log" >&2; exit 1; }
	# The CPU variants, then ggml, whisper and the quantize tool without
	# their dependency edges (make's /fast targets): ggml depends on every
	# variant the configuration lists, and only those named are wanted.
	make -C "$tmp/build" -j"$jobs" "${targets[@]}" >"$tmp/build.log" 2>&1 &&
		make -C "$tmp/build" -j"$jobs" ggml/fast >>"$tmp/build.log" 2>&1 &&
		make -C "$tmp/build" -j"$jobs" whisper/fast common/fast >>"$tmp/build.log" 2>&1 &&
		make -C "$tmp/build" -j"$jobs" whisper-quantize/fast >>"$tmp/build.log" 2>&1 ||
		{ tail -40 "$tmp/build.log" >&2; exit 1; }
	bin="$tmp/build/bin"
	gcc -std=c11 -O2 -fPIC -shared -I"$tmp/src/include" -I"$tmp/src/ggml/include" "$here/shim.c" \
		-o "$bin/libsluice_whisper.so" -L"$bin" -lwhisper -lggml -lggml-base -ldl -pthread '-Wl,-rpath,$ORIGIN'
	mkdir "$tmp/final"
	cp -a "$bin"/lib*.so* "$bin/whisper-quantize" "$tmp/final/"
	echo "$variants" >"$tmp/final/cpu-variants"
	echo "$(($(date +%s) - start)) s on $(nproc) cores" >"$tmp/final/build-time"
	echo "whisper build: $id built in $(cat "$tmp/final/build-time")" >&2
	# another build may have finished first: keep it
	mv -T "$tmp/final" "$dst" 2>/dev/null || true
	if [ "$what" = server ]; then
		make -C "$tmp/build" -j"$jobs" whisper-server/fast >>"$tmp/build.log" 2>&1 || { tail -40 "$tmp/build.log" >&2; exit 1; }
		cp "$bin/whisper-server" "$dst/whisper-server.tmp" && mv "$dst/whisper-server.tmp" "$dst/whisper-server"
	fi
fi

if [ "$what" = server ] && [ ! -f "$dst/whisper-server" ]; then
	tmp="$(mktemp -d "$out_root/.tmp.XXXXXX")"
	tmps+=("$tmp")
	echo "whisper build: examples/server for $id" >&2
	cp -r "$src" "$tmp/src" && chmod -R u+w "$tmp/src"
	cmake -S "$tmp/src" -B "$tmp/build" "${cmake_args[@]}" >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log" >&2; exit 1; }
	# It links against the folder's libraries (same source, same flags).
	make -C "$tmp/build" -j"$jobs" ggml-base >"$tmp/build.log" 2>&1 && make -C "$tmp/build" -j"$jobs" ggml/fast whisper/fast common/fast whisper-server/fast >>"$tmp/build.log" 2>&1 ||
		{ tail -40 "$tmp/build.log" >&2; exit 1; }
	cp "$tmp/build/bin/whisper-server" "$dst/whisper-server.tmp" && mv "$dst/whisper-server.tmp" "$dst/whisper-server"
fi
echo "$dst"
