#!/usr/bin/env bash
# build.sh builds libsluice_silero.so, Sluice's shim that runs all of a
# request's Silero VAD windows in one native call (silero.c beside this
# script), with Debian's gcc. No cgo and no ONNX Runtime headers: the Go
# side (backends/onnx/shim.go) loads the result with purego and passes
# OrtApi's Run function pointer.
#
#   build.sh OUT_ROOT
#
# It writes OUT_ROOT/<hash>/libsluice_silero.so, where <hash> is the first
# 12 hex digits of the SHA-256 of silero.c followed by this script; the Go
# loader embeds both files and computes the same name, so a changed shim
# is a new folder, never a stale library. Idempotent: an existing library
# is kept; a build goes to a temporary folder renamed into place, so an
# interrupted build leaves nothing under the final name. It prints the
# folder.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out_root="${1:?output root}"
hash="$(cat "$here/silero.c" "$here/build.sh" | sha256sum | cut -c1-12)"
dst="$out_root/$hash"
if [ ! -f "$dst/libsluice_silero.so" ]; then
	mkdir -p "$out_root"
	tmp="$(mktemp -d "$out_root/.tmp.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	echo "onnx shim: libsluice_silero.so for $hash (gcc)" >&2
	mkdir "$tmp/final"
	gcc -std=c11 -O2 -shared -fPIC -Wall -Wextra -Werror -o "$tmp/final/libsluice_silero.so" "$here/silero.c"
	# another build may have finished first: keep it
	mv -T "$tmp/final" "$dst" 2>/dev/null || true
fi
echo "$dst"
