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
# "1.9.1-<hash>-<BACKEND>", <hash> over the content of shim.c, this script,
# vk_layer_settings_compat.h and the CPU variant list (no path: two
# checkouts of the same commit name the same folder;
# backends/whisper/lib.go computes the same name). The whisper.cpp source
# itself is fixed by the npm version (checked below).
#
# Every backend is a GGML_BACKEND_DL folder: libggml.so only dispatches,
# each backend is a module beside it (libggml-cpu-<variant>.so, and
# libggml-vulkan.so or libggml-cuda.so), loaded by the shim's
# ggml_backend_load_all_from_path. So the engine loads a GPU folder the
# way it loads the CPU one (no soname shared with another build is ever
# loaded twice), and option gpu picks the GPU device.
#
# Vulkan: ggml-vulkan needs Debian's glslc, libvulkan-dev and
# spirv-headers. Debian's Vulkan-Headers 1.3.239 predate
# VK_EXT_layer_settings (1.3.272), which ggml-vulkan.cpp names
# unconditionally; vk_layer_settings_compat.h (beside this script) is
# force-included into the C++ compiles when the system header lacks it.
# The folder also gets whisper.cpp's whisper-cli (make
# whisper-vulkan-check runs it). Its shaders are most of the build: about
# 22 minutes wall on 2 busy cores (docs/design.md).
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
# Idempotent: an existing OUT_ROOT/<id>/libsluice_whisper.so is kept. The
# patched source and the cmake build folder live in OUT_ROOT/.build-<id>
# until the folder is complete, so a rerun after an interruption resumes
# the compile where it stopped (the Vulkan shaders take long); the result
# is assembled in a temporary folder renamed into place, so nothing is
# ever under the final name half-built. A lock (flock) serialises two
# builds of the same id. With "server" it also builds
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
	-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN'
	# ggml stamps "git rev-parse HEAD" of the folder it sits in into
	# GGML_COMMIT; under .deps that is Sluice's own repository, so every
	# Sluice commit would recompile ggml-base. /bin/true makes it "unknown".
	-DGIT_EXE=/bin/true)
targets=(ggml-base) bins=()
for v in $variants; do targets+=("ggml-cpu-$v"); done
case "$backend" in
cpu) ;;
vulkan)
	command -v glslc >/dev/null && [ -f /usr/include/vulkan/vulkan.hpp ] && [ -f /usr/share/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake ] ||
		{ echo "whisper build: vulkan needs Debian's glslc, libvulkan-dev and spirv-headers (make whisper-vulkan-check installs them)" >&2; exit 1; }
	cmake_args+=(-DGGML_VULKAN=ON) targets+=(ggml-vulkan) bins+=(whisper-cli)
	if ! grep -q 'VK_EXT_layer_settings' /usr/include/vulkan/vulkan_core.h; then
		cmake_args+=("-DCMAKE_CXX_FLAGS=-include $here/vk_layer_settings_compat.h")
	fi ;;
cuda)
	# The H200 only (sm_90): one architecture keeps the build inside the
	# device check's 10 minutes (scripts/gpu-check.sh). Without ggml's
	# FlashAttention kernels (most of ggml-cuda's template instances): the
	# engine decodes without flash attention (shim.c's load parameters).
	cmake_args+=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${SLUICE_CUDA_ARCHS:-90}" -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF) targets+=(ggml-cuda) ;;
*) echo "whisper build: backend $backend is not cpu, vulkan or cuda" >&2; exit 1 ;;
esac

hash="$( (cat "$here/shim.c" "$here/build.sh" "$here/vk_layer_settings_compat.h"; echo "$variants") | sha256sum | cut -c1-12)"
id="1.9.1-$hash-$backend"
dst="$out_root/$id"
jobs="${SLUICE_BUILD_JOBS:-$(nproc)}"

tmps=()
trap 'rm -rf "${tmps[@]}"' EXIT
mkdir -p "$out_root"
exec 9>"$out_root/.lock-$id"
flock 9

need_lib=0 need_server=0
[ -f "$dst/libsluice_whisper.so" ] || need_lib=1
[ "$what" = server ] && [ ! -f "$dst/whisper-server" ] && need_server=1
if [ $need_lib = 0 ] && [ $need_server = 0 ]; then
	echo "$dst"
	exit 0
fi

# patch_source DIR: Sluice's three fixes (above) applied to a copy of the
# source in DIR.
patch_source() {
	f="$1/src/whisper.cpp"
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
	g="$1/ggml/src/ggml.c"
	conv='struct ggml_tensor * im2col = ggml_im2col(ctx, a, b, s0, 0, p0, 0, d0, 0, false, GGML_TYPE_F16); // [N, OL, IC * K]'
	[ "$(grep -cF "$conv" "$g")" = 1 ] || { echo "whisper build: the conv fix's anchor is not in $g once" >&2; exit 1; }
	sed -i 's|ggml_im2col(ctx, a, b, s0, 0, p0, 0, d0, 0, false, GGML_TYPE_F16); // \[N, OL, IC \* K\]|ggml_im2col(ctx, a, b, s0, 0, p0, 0, d0, 0, false, a->type == GGML_TYPE_F32 ? GGML_TYPE_F32 : GGML_TYPE_F16); // sluice: f32 kernels (build.sh)|' "$g"
	[ "$(grep -c 'sluice: f32 kernels' "$g")" = 1 ] || { echo "whisper build: the conv fix did not apply" >&2; exit 1; }
}

# The cmake build folder is named by what its compile depends on: the
# whisper.cpp source's content, patch_source's text, the cmake options
# (the compat header by content, not by path) and the targets, not by <id>:
# an edit of shim.c or of this script's comments relinks in seconds
# instead of recompiling (a Vulkan build's shaders take long). It is kept
# after a GPU build for that reason (a CPU build's is removed).
key="$(
	cd "$src"
	{
		find CMakeLists.txt cmake src include ggml examples -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
		declare -f patch_source
		printf '%s\n' "${cmake_args[@]}" "${targets[@]}" "${bins[@]}" | sed "s|$here/||"
		cat "$here/vk_layer_settings_compat.h"
	} | sha256sum | cut -c1-12
)"
work="$out_root/.build-$backend-$key"
if [ ! -f "$work/src.ok" ]; then
	rm -rf "$work"
	mkdir -p "$work"
	cp -r "$src" "$work/src"
	chmod -R u+w "$work/src"
	patch_source "$work/src"
	touch "$work/src.ok"
fi
cmake -S "$work/src" -B "$work/build" "${cmake_args[@]}" >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; exit 1; }
bin="$work/build/bin"
# mk TARGET...: make under nice (the builds share the machine), its log
# appended to build.log, the log's tail on failure.
mk() { nice -n 10 make -C "$work/build" -j"$jobs" "$@" >>"$work/build.log" 2>&1 || { tail -40 "$work/build.log" >&2; exit 1; }; }

if [ $need_lib = 1 ]; then
	echo "whisper build: whisper.cpp 1.9.1 for $id (CPU variants: $variants)" >&2
	start=$(date +%s)
	# The CPU variants (and GPU module), then ggml, whisper and the tools
	# without their dependency edges (make's /fast targets): ggml depends
	# on every variant the configuration lists, and only those named are
	# wanted.
	mk "${targets[@]}"
	mk ggml/fast
	mk whisper/fast common/fast
	mk whisper-quantize/fast
	for t in "${bins[@]}"; do mk "$t/fast"; done
	gcc -std=c11 -O2 -fPIC -shared -I"$work/src/include" -I"$work/src/ggml/include" "$here/shim.c" \
		-o "$bin/libsluice_whisper.so" -L"$bin" -lwhisper -lggml -lggml-base -ldl -pthread '-Wl,-rpath,$ORIGIN'
	final="$(mktemp -d "$out_root/.tmp.XXXXXX")"
	tmps+=("$final")
	cp -a "$bin"/lib*.so* "$bin/whisper-quantize" "$final/"
	for t in "${bins[@]}"; do cp -a "$bin/$t" "$final/"; done
	echo "$variants" >"$final/cpu-variants"
	{
		echo "$(($(date +%s) - start)) s on $(nproc) cores (a resumed build is shorter)"
		grep -E 'supported by glslc' "$work/configure.log" | sed 's/^-- /shader extension: /' || true
	} >"$final/build-time"
	echo "whisper build: $id built in $(head -1 "$final/build-time")" >&2
	rm -rf "$dst"
	mv -T "$final" "$dst"
fi
if [ $need_server = 1 ]; then
	echo "whisper build: examples/server for $id" >&2
	# It links against the folder's libraries (same source, same flags).
	mk ggml-base
	mk ggml/fast whisper/fast common/fast whisper-server/fast
	cp "$bin/whisper-server" "$dst/whisper-server.tmp" && mv "$dst/whisper-server.tmp" "$dst/whisper-server"
fi
[ "$backend" != cpu ] || rm -rf "$work"
echo "$dst"
