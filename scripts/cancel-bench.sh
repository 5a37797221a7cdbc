#!/usr/bin/env bash
# cancel-bench.sh: cancel-to-free-slot over HTTP for every engine of the
# default root (CONTRACT.md engine.cancel). Starts `sluice serve` on
# 127.0.0.1 with one slot per model, then for each model TRIALS times:
# posts a long request (ASR, VAD and diarization: jfk.wav repeated to
# about 220 s; TTS: 4,000 characters at speed 0.25), lets the client leave
# after LEAVE seconds, and times from the client leaving until a short
# request (0.5 s of silence; one short sentence) on the same model has
# been answered. Beside it, in the same run, the short request alone on an
# idle slot (p50 of 3) and the long request's own time (once, capped at
# 60 s; the slot is then waited for by the first trial): a cancel
# that did not stop the work shows the long request's remaining time.
# Usage:
#   scripts/cancel-bench.sh SLUICE_BINARY [TRIALS] [LEAVE] [MODELS]
# MODELS: comma-separated of asr,vad,diar,flite,espeak (default those
# five), whisper (the synthetic tiny checkpoint: the root is then rebuilt
# with it into a temporary folder by sluice-models -whisper) and the names
# of synthetic sherpa-onnx checkpoints (copied from $SHERPA_MODELS_ROOT,
# default models-sherpa, into that temporary root). Each may carry its own
# leave time, NAME:SECONDS (e.g. espeak:0.3): an engine that answers the
# long request before the client leaves does not exercise the cancel, so
# the summary marks a trial set whose uncancelled long request took less
# than its leave time, or was refused (a model with a shorter audio limit),
# as "not exercised".
# (`make bench-cancel` builds the binary and runs it.)
set -euo pipefail
bin=${1:?sluice binary}
trials=${2:-5}
leave=${3:-2}
only=${4:-asr,vad,diar,flite,espeak}
root=${MODELS_ROOT:-models}
npm=${NPM_PREFIX:-.deps/npm}
sherpa_root=${SHERPA_MODELS_ROOT:-models-sherpa}
port=$((20000 + RANDOM % 20000))
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
IFS=, read -ra entries <<<"$only"
models=()
declare -A leaves tasks
for e in "${entries[@]}"; do
  m=${e%%:*}
  models+=("$m")
  leaves[$m]=$leave
  [[ $e == *:* ]] && leaves[$m]=${e#*:}
done
cat > "$tmp/models.yaml" <<YAML
models:
  - {id: asr, engine: pocketsphinx, task: asr, checkpoint: pocketsphinx-en-us, slots: 1}
  - {id: vad, engine: onnx, task: vad, checkpoint: silero-v5, slots: 1}
  - {id: diar, engine: diarize, task: diarization, checkpoint: diarize-silero, slots: 1}
  - {id: flite, engine: flite, task: tts, checkpoint: flite-slt, slots: 1}
  - {id: espeak, engine: espeak, task: tts, checkpoint: espeak-en, slots: 1}
YAML
for m in "${models[@]}"; do
  case $m in
  asr | vad | diar | flite | espeak) ;;
  whisper)
    if [ "$root" != "$tmp/root" ]; then
      go run ./backends/catalogue/cmd/sluice-models -root "$tmp/root" -npm "$npm" -whisper >/dev/null
      root=$tmp/root
    fi
    echo "  - {id: whisper, engine: whisper, task: asr, checkpoint: whisper-synthetic-tiny, slots: 1}" >>"$tmp/models.yaml"
    tasks[$m]=asr
    ;;
  sherpa-*)
    if [ "$root" != "$tmp/root" ]; then
      mkdir -p "$tmp/root" && cp -r "$root"/. "$tmp/root/"
      root=$tmp/root
    fi
    cp -r "$sherpa_root/$m" "$root/"
    tasks[$m]=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["task"])' "$root/$m/manifest.json")
    echo "  - {id: $m, engine: sherpa, task: ${tasks[$m]}, checkpoint: $m, slots: 1}" >>"$tmp/models.yaml"
    ;;
  *) echo "cancel-bench: unknown model $m" >&2; exit 2 ;;
  esac
done
jfk=$(find "$npm" -name jfk.wav | head -1)
python3 - "$jfk" "$tmp/long.wav" "$tmp/short.wav" "$tmp" <<'PY'
import sys, wave, json
src = wave.open(sys.argv[1])
frames, params = src.readframes(src.getnframes()), src.getparams()
for path, data in ((sys.argv[2], frames * 20), (sys.argv[3], b"\0\0" * (params.framerate // 2))):
    w = wave.open(path, "wb"); w.setparams(params); w.writeframes(data); w.close()
text = ("The committee will review every application before the end of the month. " * 60)[:4000]
import glob, os
for m in ["flite", "espeak"] + [os.path.basename(d) for d in glob.glob(sys.argv[4] + "/root/sherpa-*")]:
    json.dump({"model": m, "input": text, "speed": 0.25, "response_format": "wav"}, open(f"{sys.argv[4]}/long-{m}.json", "w"))
    json.dump({"model": m, "input": "Yes.", "response_format": "wav"}, open(f"{sys.argv[4]}/short-{m}.json", "w"))
PY
"$bin" serve --parallel-jobs --listen "127.0.0.1:$port" --models-root "$root" --config "$tmp/models.yaml" >"$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 300); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
u="http://127.0.0.1:$port"
# req MODEL long|short [curl args]: one request, prints its HTTP code.
req() {
  local m=$1 kind=$2; shift 2
  local c=(curl -sS -o /dev/null -w '%{http_code}')
  case $m in
  asr) "${c[@]}" -F model=asr -F "file=@$tmp/$kind.wav" "$u/v1/audio/transcriptions" "$@" ;;
  vad) "${c[@]}" -F model=vad -F "file=@$tmp/$kind.wav" "$u/v1/audio/voice-activity" "$@" ;;
  diar) "${c[@]}" -F model=diar -F "file=@$tmp/$kind.wav" "$u/v1/audio/diarization" "$@" ;;
  whisper) "${c[@]}" -F model=whisper -F "file=@$tmp/$kind.wav" "$u/v1/audio/transcriptions" "$@" ;;
  sherpa-*)
    if [ "${tasks[$m]}" = tts ]; then
      "${c[@]}" -H 'Content-Type: application/json' --data-binary "@$tmp/$kind-$m.json" "$u/v1/audio/speech" "$@"
    else
      "${c[@]}" -F "model=$m" -F "file=@$tmp/$kind.wav" "$u/v1/audio/transcriptions" "$@"
    fi
    ;;
  flite | espeak) "${c[@]}" -H 'Content-Type: application/json' --data-binary "@$tmp/$kind-$m.json" "$u/v1/audio/speech" "$@" ;;
  esac
}
now() { date +%s.%N; }
summary=()
for m in "${models[@]}"; do
  req "$m" short >/dev/null # load the model
  idle=()
  for _ in 1 2 3; do
    t0=$(now); req "$m" short >/dev/null; t1=$(now)
    idle+=("$(echo "$t1 - $t0" | bc -l)")
  done
  alone=$(printf '%s\n' "${idle[@]}" | sort -n | sed -n 2p)
  t0=$(now); lcode=$(req "$m" long -m 60 || true); t1=$(now) # capped: 60.00 means "60 s or more"
  full=$(echo "$t1 - $t0" | bc -l)
  printf '%s: short request alone p50 %.2f s; long request uncancelled %s in %.2f s\n' "$m" "$alone" "$lcode" "$full"
  ts=()
  for t in $(seq "$trials"); do
    req "$m" long -m "${leaves[$m]}" >/dev/null 2>&1 || true # the client leaves after its leave time
    t0=$(now)
    code=$(req "$m" short -m 600)
    t1=$(now)
    d=$(echo "$t1 - $t0" | bc -l)
    printf '%s trial %d: short request answered %s %.2f s after the client left\n' "$m" "$t" "$code" "$d"
    ts+=("$d")
  done
  line=$(printf '%s\n' "${ts[@]}" | sort -n | awk -v m="$m" -v a="$alone" -v f="$full" -v l="${leaves[$m]}" -v c="$lcode" '{x[NR]=$1} END {printf "%-7s cancel-to-free-slot over %d trials: p50 %.2f s, max %.2f s (short alone %.2f s; long uncancelled %s in %.2f s; client left after %s s%s)", m, NR, x[int((NR+1)/2)], x[NR], a, c, f, l, (c != "200" && c != "000") ? ": NOT EXERCISED, the long request is refused" : (f + 0 < l + 0) ? ": NOT EXERCISED, the long request ends before the client leaves" : ""}')
  echo "$line"
  summary+=("$line")
done
echo
printf '%s\n' "${summary[@]}"
