#!/usr/bin/env bash
# build.sh builds libsluice_av.so, Sluice's shim over Debian's FFmpeg
# libraries (av.c: WebM/Matroska and MP4/M4A demuxing with the Opus,
# Vorbis and AAC decoders; enc.c: encoding, e.g. AAC in ADTS), with
# Debian's gcc against libavformat-dev, libavcodec-dev, libswresample-dev
# and libavutil-dev (scripts/engine-deps.sh installs them). No cgo: the Go
# side (backends/audio/av) loads the result with purego.
#
#   build.sh OUT_ROOT
#
# It writes OUT_ROOT/<hash>/libsluice_av.so, where <hash> is the first 12
# hex digits of the SHA-256 of av.c, enc.c and this script; the Go loader
# embeds the three files and computes the same name, so a changed shim is a
# new folder, never a stale library. Idempotent: an existing library is
# kept; a build goes to a temporary folder renamed into place. It prints
# the folder.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out_root="${1:?output root}"
hash="$(cat "$here/av.c" "$here/enc.c" "$here/build.sh" | sha256sum | cut -c1-12)"
dst="$out_root/$hash"
if [ ! -f "$dst/libsluice_av.so" ]; then
	mkdir -p "$out_root"
	tmp="$(mktemp -d "$out_root/.tmp.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	echo "av shim: libsluice_av.so for $hash (gcc)" >&2
	mkdir "$tmp/final"
	gcc -std=gnu11 -O2 -shared -fPIC -Wall -Wextra -Werror -o "$tmp/final/libsluice_av.so" \
		"$here/av.c" "$here/enc.c" -lavformat -lavcodec -lswresample -lavutil
	# another build may have finished first: keep it
	mv -T "$tmp/final" "$dst" 2>/dev/null || true
fi
echo "$dst"
