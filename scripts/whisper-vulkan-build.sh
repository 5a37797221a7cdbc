#!/usr/bin/env bash
# whisper-vulkan-build.sh builds whisper.cpp 1.9.1 with ggml's Vulkan backend
# from the source the npm package nodejs-whisper@0.3.1 ships
# (cpp/whisper.cpp), with Debian's cmake, gcc, g++, glslc (shaderc 2023.2)
# and Vulkan headers (libvulkan-dev 1.3.239, spirv-headers).
#
#   whisper-vulkan-build.sh NPM_PREFIX OUT_ROOT
#
# It prints OUT_ROOT/<id>, a folder holding libwhisper.so.1 (and a
# libwhisper.so link), libggml.so.0, libggml-base.so.0, libggml-cpu.so.0,
# libggml-vulkan.so.0 (RUNPATH $ORIGIN only, so dlopen of libwhisper.so.1
# alone finds the rest; from Debian they need libvulkan1, libgomp1 and a
# Vulkan driver), whisper.cpp's own whisper-cli and the concurrency check
# scripts/whispervk/states.c built against them (whispervk-states), plus
# build.txt (flags and build time).
# <id> is "1.9.1-<hash>-vulkan": <hash> covers the whisper.cpp source
# (CMake files, src/, include/, ggml/, examples/), this script and states.c,
# so an edited source or flag rebuilds and an unchanged one does not.
# Idempotent: an existing OUT_ROOT/<id>/libwhisper.so.1 is kept; a build is
# assembled in a temporary folder renamed into place. The cmake build
# folder (.deps/whisper-vulkan-build/<hash of source and options>, or the
# folder SLUICE_WHISPER_VK_BUILD names) is kept, so a rerun after an
# interruption resumes where it stopped.
#
# ggml is linked in (GGML_BACKEND_DL=OFF): the Vulkan backend registers
# itself inside libggml.so, no ggml_backend_load is needed. The CPU backend
# is built for x86-64 with SSE4.2/AVX/AVX2/BMI2/FMA/F16C (GGML_NATIVE=OFF,
# ggml's defaults), each switched off when /proc/cpuinfo lacks it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
npm="${1:?npm prefix}" out_root="${2:?output root}"
src="$npm/node_modules/nodejs-whisper/cpp/whisper.cpp"
[ -f "$src/CMakeLists.txt" ] || { echo "whisper-vulkan build: $src missing (npm install nodejs-whisper@0.3.1)" >&2; exit 1; }
grep -q 'project("whisper.cpp" VERSION 1.9.1)' "$src/CMakeLists.txt" || { echo "whisper-vulkan build: $src is not whisper.cpp 1.9.1" >&2; exit 1; }
for t in cmake gcc g++ glslc; do
	command -v "$t" >/dev/null || { echo "whisper-vulkan build: $t missing (apt-get install cmake gcc g++ glslc libvulkan-dev spirv-headers)" >&2; exit 1; }
done
[ -f /usr/include/vulkan/vulkan.hpp ] || { echo "whisper-vulkan build: vulkan.hpp missing (apt-get install libvulkan-dev)" >&2; exit 1; }
[ -f /usr/share/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake ] || { echo "whisper-vulkan build: SPIRV-Headers missing (apt-get install spirv-headers)" >&2; exit 1; }

# CPU instruction sets: ggml's GGML_NATIVE=OFF defaults, minus what this
# CPU lacks (the folder name says which were switched off).
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
cpu_opts=() off=()
for f in sse4_2:SSE42 avx:AVX avx2:AVX2 bmi2:BMI2 fma:FMA f16c:F16C; do
	probe=${f%%:*} opt=${f##*:}
	case "$cpu_flags" in
	*" $probe "*) cpu_opts+=("-DGGML_$opt=ON") ;;
	*) cpu_opts+=("-DGGML_$opt=OFF") off+=("no${probe}") ;;
	esac
done

# The cmake options. Every optional shader extension is detected by
# ggml-vulkan's CMakeLists from glslc itself (test_shader_extension_support);
# Debian's glslc 2023.2 has none of cooperative matrix (KHR, NV2),
# integer dot product or bfloat16, so those pipelines are left out and the
# scalar/subgroup shaders (fp16 where the device has it) serve.
opts=(
	-DCMAKE_BUILD_TYPE=Release
	-DBUILD_SHARED_LIBS=ON
	-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON -DCMAKE_INSTALL_RPATH='$ORIGIN'
	-DGGML_VULKAN=ON -DGGML_BACKEND_DL=OFF -DGGML_NATIVE=OFF -DGGML_CCACHE=OFF
	# ggml stamps "git rev-parse HEAD" of the folder it sits in into
	# GGML_COMMIT; under .deps that is Sluice's own repository, so every
	# Sluice commit would recompile ggml-base. /bin/true makes it "unknown".
	-DGIT_EXE=/bin/true
	"${cpu_opts[@]}"
	-DWHISPER_BUILD_TESTS=OFF -DWHISPER_BUILD_SERVER=OFF -DWHISPER_BUILD_EXAMPLES=ON
	-DWHISPER_SDL2=OFF -DWHISPER_CURL=OFF
)

# Debian's Vulkan-Headers 1.3.239 predate VK_EXT_layer_settings (1.3.272),
# which ggml-vulkan.cpp names unconditionally when it creates the instance;
# the compat header declares it (scripts/whispervk/vk_layer_settings_compat.h,
# the only gap: everything else newer is behind #if in ggml-vulkan.cpp).
compat="$here/whispervk/vk_layer_settings_compat.h"
if ! grep -q 'VK_EXT_layer_settings' /usr/include/vulkan/vulkan_core.h; then
	opts+=("-DCMAKE_CXX_FLAGS=-include $compat")
fi

# src_hash (the source and the cmake options) names the cmake build folder;
# hash adds this script and states.c and names the output folder.
src_hash="$(
	cd "$src"
	{
		find CMakeLists.txt cmake src include ggml examples -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
		printf '%s\n' "${opts[@]}"
		cat "$compat"
	} | sha256sum | cut -c1-12
)"
hash="$({ echo "$src_hash"; cat "$here/whisper-vulkan-build.sh" "$here/whispervk/states.c"; } | sha256sum | cut -c1-12)"
id="1.9.1-$hash-vulkan"
[ ${#off[@]} -eq 0 ] || id="$id-$(IFS=_; echo "${off[*]}")"
dst="$out_root/$id"
if [ -f "$dst/libwhisper.so.1" ] && [ -f "$dst/whispervk-states" ]; then
	echo "$dst"
	exit 0
fi

build="${SLUICE_WHISPER_VK_BUILD:-$(dirname "$out_root")/whisper-vulkan-build/$src_hash}"
jobs="${SLUICE_BUILD_JOBS:-$(nproc)}"
mkdir -p "$build" "$out_root"
tmp="$(mktemp -d "$out_root/.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "whisper-vulkan build: $id in $build (cmake ${opts[*]})" >&2
# cpu_s FILE: the CPU seconds (user + system) of this script's finished
# children, from the output of the times builtin (run in this shell, not a
# subshell, which would count only its own children).
cpu_s() { tail -1 "$1" | awk '{ for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); t += a[1] * 60 + a[2] } printf "%.0f", t }'; }
times >"$tmp/times0"
start=$(date +%s.%N)
nice -n 10 cmake -S "$src" -B "$build" "${opts[@]}" >"$build/configure.log" 2>&1 ||
	{ tail -30 "$build/configure.log" >&2; exit 1; }
grep -E 'supported by glslc' "$build/configure.log" >&2 || true
nice -n 10 cmake --build "$build" -j "$jobs" --target whisper whisper-cli >"$build/build.log" 2>&1 ||
	{ grep -E -B2 -A6 'error|Error' "$build/build.log" | tail -60 >&2; exit 1; }
gcc -O2 -Wall -Werror -pthread -I"$src/include" -I"$src/ggml/include" \
	"$here/whispervk/states.c" -o "$build/whispervk-states" \
	-L"$build/bin" -lwhisper -lggml -lggml-base -Wl,-rpath,'$ORIGIN'
end=$(date +%s.%N)
times >"$tmp/times1"
cpu=$(($(cpu_s "$tmp/times1") - $(cpu_s "$tmp/times0")))
rm "$tmp/times0" "$tmp/times1"

# Each library under its soname (what the others' NEEDED entries name).
for l in libwhisper.so.1 libggml.so.0 libggml-base.so.0 libggml-cpu.so.0 libggml-vulkan.so.0; do
	cp -L "$build/bin/$l" "$tmp/$l"
done
ln -s libwhisper.so.1 "$tmp/libwhisper.so"
cp "$build/bin/whisper-cli" "$build/whispervk-states" "$tmp/"
{
	echo "whisper.cpp 1.9.1 (npm nodejs-whisper@0.3.1), ggml Vulkan backend"
	echo "cmake options: ${opts[*]}"
	echo "glslc: $(glslc --version 2>&1 | head -1); libvulkan-dev $(dpkg-query -W -f='${Version}' libvulkan-dev 2>/dev/null)"
	grep -E 'supported by glslc' "$build/configure.log" | sed 's/^-- /shader extension: /'
	awk -v s="$start" -v e="$end" -v c="$cpu" -v j="$jobs" \
		'BEGIN { printf "build: %.0f s wall, %d s CPU (user+system), -j %s under nice 10 (a resumed build is shorter)\n", e - s, c, j }'
} >"$tmp/build.txt"
rm -rf "$dst"
mv "$tmp" "$dst"
trap - EXIT
echo "$dst"
