#!/usr/bin/env bash
# benchhttp-instr.sh: make bench-http's comparison counted in instructions
# instead of timed: each target of scripts/benchhttp (sluice, bare) runs
# alone under valgrind's callgrind for N1 and N2 requests, and the
# difference of the two totals over N2-N1 is its instructions per warm
# request, client and server together as bench-http's CPU ratio counts
# them (start-up and warm-up cancel out). Threads run one at a time under
# valgrind, so the count does not move with other load on the machine:
# runs of one binary agree within about 0.5k of 150-175k. It is printed
# with the garbage collector on (as served) and off (GOGC=off: what the
# code itself executes, without the collector's share, which depends on
# the bytes allocated).
#
# Size: REPS runs per target and mode (default 1; the figure is their
# median), N1=300 and N2=2300 requests: about 30 s per rep on 2 cores.
# valgrind comes from Debian (installed here when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${REPS:-1}"
N1="${N1:-300}"
N2="${N2:-2300}"
SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
	"${SUDO[@]}" apt-get update
	DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y --no-install-recommends valgrind
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -o "$work/bh" ./scripts/benchhttp

# total <callgrind file>: the instructions the run executed.
total() { callgrind_annotate "$1" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'; }

# perreq <target> <gogc>: instructions per request of one rep.
perreq() {
	local n t=()
	for n in "$N1" "$N2"; do
		GOGC="$2" GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$work/cg.$n" \
			"$work/bh" -only "$1" -rounds 1 -warmup 1ms -d 300s -n "$n" >"$work/out.$n" 2>&1 ||
			{ cat "$work/out.$n" >&2; exit 1; }
		t+=("$(total "$work/cg.$n")")
	done
	echo $(((t[1] - t[0]) / (N2 - N1)))
}

# median of the arguments.
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }

echo "instructions per request under callgrind, $N1 and $N2 requests, median of $REPS rep(s); sluice and bare alternate"
for gogc in 100 off; do
	s=() b=()
	for ((i = 0; i < REPS; i++)); do
		s+=("$(perreq sluice "$gogc")")
		b+=("$(perreq bare "$gogc")")
	done
	ms="$(median "${s[@]}")" mb="$(median "${b[@]}")"
	awk -v g="$gogc" -v s="$ms" -v b="$mb" -v rs="${s[*]}" -v rb="${b[*]}" 'BEGIN {
		printf "GOGC=%-3s sluice %d (runs %s)  bare %d (runs %s)  ratio bare/sluice %.3f\n", g, s, rs, b, rb, b / s }'
done
