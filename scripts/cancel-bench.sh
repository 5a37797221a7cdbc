#!/usr/bin/env bash
# cancel-bench.sh: cancel-to-free-slot over HTTP (CONTRACT.md E3). Starts
# `sluice serve` on 127.0.0.1 with one pocketsphinx slot, then TRIALS times:
# posts a long upload (jfk.wav repeated to about 220 s), lets the client
# leave after LEAVE seconds, and times from the client leaving until a
# short request (0.5 s of silence) on the same model has been answered.
# Prints each trial, then p50 and max. Usage:
#   scripts/cancel-bench.sh SLUICE_BINARY [TRIALS] [LEAVE]
# (`make bench-cancel` builds the binary and runs it.)
set -euo pipefail
bin=${1:?sluice binary}
trials=${2:-5}
leave=${3:-2}
root=${MODELS_ROOT:-models}
npm=${NPM_PREFIX:-.deps/npm}
port=$((20000 + RANDOM % 20000))
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
cat > "$tmp/models.yaml" <<YAML
models:
  - id: asr
    engine: pocketsphinx
    task: asr
    checkpoint: pocketsphinx-en-us
    slots: 1
YAML
jfk=$(find "$npm" -name jfk.wav | head -1)
python3 - "$jfk" "$tmp/long.wav" "$tmp/short.wav" <<'PY'
import sys, wave
src = wave.open(sys.argv[1])
frames, params = src.readframes(src.getnframes()), src.getparams()
for path, data in ((sys.argv[2], frames * 20), (sys.argv[3], b"\0\0" * (params.framerate // 2))):
    w = wave.open(path, "wb"); w.setparams(params); w.writeframes(data); w.close()
PY
"$bin" serve --parallel-jobs --listen "127.0.0.1:$port" --models-root "$root" --config "$tmp/models.yaml" >"$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 300); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
post() { curl -sS -o /dev/null -w '%{http_code}' -F model=asr -F "file=@$1" "http://127.0.0.1:$port/v1/audio/transcriptions" "${@:2}"; }
post "$tmp/short.wav" >/dev/null # load the model
idle=()
for _ in 1 2 3; do
  t0=$(date +%s.%N); post "$tmp/short.wav" >/dev/null; t1=$(date +%s.%N)
  idle+=("$(echo "$t1 - $t0" | bc -l)")
done
printf '%s\n' "${idle[@]}" | sort -n | awk '{a[NR]=$1} END {printf "the short request alone, idle slot: p50 %.2f s\n", a[2]}'
ts=()
for t in $(seq "$trials"); do
  post "$tmp/long.wav" -m "$leave" >/dev/null 2>&1 || true # the client leaves after $leave s
  t0=$(date +%s.%N)
  code=$(post "$tmp/short.wav" -m 600)
  t1=$(date +%s.%N)
  d=$(echo "$t1 - $t0" | bc -l)
  printf 'trial %d: short request answered %s %.2f s after the client left\n' "$t" "$code" "$d"
  ts+=("$d")
done
printf '%s\n' "${ts[@]}" | sort -n | awk '{a[NR]=$1} END {printf "cancel-to-free-slot over %d trials: p50 %.2f s, max %.2f s\n", NR, a[int((NR+1)/2)], a[NR]}'
