#!/usr/bin/env bash
# bench/heap.sh [BUILD]: the cost of heap tracing per allocation (part of
# make bench).  See bench/README.md.
#
# Target: BUILD/fixtures/heap-pairs N DEPTH (fixtures/heap-pairs.c): N
# malloc(64) + free pairs at the bottom of a DEPTH-frame stack, -O2 with
# frame pointers.  For each DEPTH (1 and 30) it runs, REPS interleaved
# rounds in a rotated order:
#
#   unprofiled   heap-pairs N DEPTH
#   ltrace       ltrace -e malloc+free -o /dev/null heap-pairs N DEPTH
#   heaptrack    heaptrack -o TMP/ht heap-pairs N DEPTH   (LD_PRELOAD,
#                records a backtrace per call; its file is deleted)
#   cprof        cprof-attach --heap -q -o TMP/heap.txt -- heap-pairs N DEPTH
#
# each with N pairs and with 1 pair (the tool's start-up and tear-down),
# timing the whole command (wall clock, as a user waits for it).  Reports
# medians of wall time, the added cost per pair, (tool - unprofiled) / N,
# the same net of start-up, ((tool_N - tool_1) - (base_N - base_1)) /
# (N - 1), and the ratios cprof/ltrace and cprof/heaptrack of both.  Every
# run must print heap-pairs' own "ok CHECKSUM" line, the same as
# unprofiled: a tool that breaks the target is a failed measurement.
#
# A reference tool that is not installed is skipped with a message.  If
# cprof-attach --heap does not work at all (a quick probe run fails), its
# row says "cprof-attach --heap failed" with the error and the other rows
# are still measured.  Exit status: 0 every measurement ran, 1 one failed
# (cprof-attach included), 2 usage.
set -euo pipefail
export LC_ALL=C

if [[ $# -gt 1 || ${1:-} == -h || ${1:-} == --help ]]; then
	cat <<'EOF'
Usage: bash bench/heap.sh [BUILD]   (default BUILD: build)
Environment (defaults in brackets):
  N [20000]           malloc+free pairs per run (ltrace needs 300-500 us a pair)
  DEPTHS ["1 30"]     stack depths at the allocation
  REPS [5]            interleaved rounds (every tool, N and 1 pair, each round)
  TIMEOUT [300]       seconds before one run is killed (and counted failed)
  QUICK [0]           1: N=5000 REPS=3
EOF
	[[ ${1:-} == -h || ${1:-} == --help ]] && exit 0
	exit 2
fi

BUILD=${1:-build}
[[ ${QUICK:-0} == 1 ]] && { N=${N:-5000}; REPS=${REPS:-3}; } # make bench QUICK=1
N=${N:-20000}
DEPTHS=${DEPTHS:-"1 30"}
REPS=${REPS:-5}
TIMEOUT=${TIMEOUT:-300}
CPROF=$BUILD/cprof-attach
PAIRS=$BUILD/fixtures/heap-pairs
FAILURES=0

die() { echo "heap.sh: $*" >&2; exit 1; }
note_failure() { echo "  FAILED: $*"; FAILURES=$((FAILURES + 1)); }

[[ -x $PAIRS ]] || die "$PAIRS not found: build it first (make BUILD=$BUILD fixtures)"
[[ $N =~ ^[0-9]+$ && $N -ge 2 ]] || die "N must be a number >= 2, not '$N'"
command -v timeout >/dev/null || die "timeout (coreutils) is needed"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/cprof-heap-bench.XXXXXX")
RES=$TMP/results
mkdir -p "$RES"

# ---- processes: the one command running is tracked, killed and reaped -----

RUNNING=""
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
	if [[ -n $RUNNING ]]; then
		kill -TERM "$RUNNING" 2>/dev/null || true
		sleep 0.2
		kill -KILL "$RUNNING" 2>/dev/null || true
		wait "$RUNNING" 2>/dev/null || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'echo "heap.sh: interrupted" >&2; exit 130' INT TERM HUP

# Run "$@" under timeout in the background and wait for it (so a signal to
# this script is handled at once); stdout to $TMP/out, stderr to $TMP/err.
# Sets ELAPSED (seconds, wall clock); returns the command's status.
timed_run() {
	local start end rc=0
	start=$EPOCHREALTIME
	timeout -k 5 "$TIMEOUT" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null &
	RUNNING=$!
	wait "$RUNNING" || rc=$?
	end=$EPOCHREALTIME
	RUNNING=""
	ELAPSED=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.6f", b - a }')
	return "$rc"
}

# ---- numbers (as in bench/run.sh) --------------------------------------------

record() { echo "$2" >>"$RES/$1"; }

# Median of the values recorded under KEY ("nan" if none).
median_of() {
	[[ -s $RES/$1 ]] || { echo nan; return; }
	sort -g "$RES/$1" | awk '{ v[NR] = $1 }
		END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# calc EXPR [VARS...]: awk arithmetic on a, b, c, d; any "nan" operand
# gives "nan".
calc() {
	local expr=$1 a
	shift
	for a in "$@"; do
		[[ $a == nan || -z $a ]] && { echo nan; return; }
	done
	awk -v a="${1:-0}" -v b="${2:-0}" -v c="${3:-0}" -v d="${4:-0}" "BEGIN { x = $expr; print x }"
}

# shellcheck disable=SC2059  # the format is the point
fmt() { # fmt PRINTF_FORMAT VALUE: "n/a" for nan
	if [[ $2 == nan || -z $2 ]]; then echo n/a; else printf "$1" "$2"; fi
}

# ---- the tools ---------------------------------------------------------------

TOOLS=(unprofiled ltrace heaptrack cprof)
declare -A LABEL=([unprofiled]="unprofiled" [ltrace]="ltrace -e malloc+free"
	[heaptrack]="heaptrack" [cprof]="cprof-attach --heap")
declare -A SKIP=()

# The command line of TOOL on heap-pairs COUNT DEPTH, in the array CMD.
command_of() { # TOOL COUNT DEPTH
	case $1 in
	unprofiled) CMD=("$PAIRS" "$2" "$3") ;;
	ltrace) CMD=(ltrace -e malloc+free -o /dev/null "$PAIRS" "$2" "$3") ;;
	heaptrack) CMD=(heaptrack -o "$TMP/ht/pairs" "$PAIRS" "$2" "$3") ;;
	cprof) CMD=("$CPROF" --heap -q -o "$TMP/heap.txt" -- "$PAIRS" "$2" "$3") ;;
	esac
}

# The first line of the last run's stderr that looks like an error.
run_error() {
	grep -m1 -iE 'error|fail|cannot|unknown|unrecognized|invalid|usage' "$TMP/err" ||
		tail -n1 "$TMP/err" || true
}

command -v ltrace >/dev/null || SKIP[ltrace]="ltrace not installed (apt-get install ltrace): skipped"
command -v heaptrack >/dev/null || SKIP[heaptrack]="heaptrack not installed (apt-get install heaptrack): skipped"
if [[ ! -x $CPROF ]]; then
	SKIP[cprof]="cprof-attach --heap failed: $CPROF is not built (make BUILD=$BUILD)"
else
	# A short probe first: until cprof-attach has --heap, the bench says
	# so once and measures the others.
	rc=0
	timed_run "$CPROF" --heap -q -o "$TMP/heap.txt" -- "$PAIRS" 100 1 || rc=$?
	if [[ $rc != 0 ]] || ! grep -q '^ok ' "$TMP/out"; then
		SKIP[cprof]="cprof-attach --heap failed (exit $rc): $(run_error)"
		FAILURES=$((FAILURES + 1))
	fi
fi

echo "heap tracing benchmark: $CPROF ($("$CPROF" --version 2>/dev/null | head -n1 || echo '?'))"
echo "machine: $(nproc) CPUs, Linux $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "target: $PAIRS $N DEPTH ($N malloc(64)+free pairs; also 1 pair, for each tool's start-up)"
for tool in "${TOOLS[@]}"; do
	[[ -n ${SKIP[$tool]:-} ]] && echo "${SKIP[$tool]}"
done
SECONDS=0

# The checksum heap-pairs prints for COUNT pairs (the same at any depth).
declare -A EXPECTED=()
for count in "$N" 1; do
	"$PAIRS" "$count" 1 >"$TMP/out" || die "$PAIRS $count 1 failed"
	EXPECTED[$count]=$(grep -m1 '^ok ' "$TMP/out") || die "$PAIRS $count 1 printed no ok line"
done

# One run of TOOL on COUNT pairs at DEPTH; records its wall time.
measure() { # TOOL COUNT DEPTH
	local rc=0
	[[ -n ${SKIP[$1]:-} ]] && return 0
	command_of "$@"
	rm -rf "$TMP/ht" "$TMP/heap.txt"
	mkdir -p "$TMP/ht"
	timed_run "${CMD[@]}" || rc=$?
	if [[ $rc != 0 ]]; then
		note_failure "${LABEL[$1]}, $2 pairs, depth $3 (exit $rc$([[ $rc == 124 ]] && echo ", timed out after $TIMEOUT s")): $(run_error)"
		return 0
	fi
	if ! grep -qx "${EXPECTED[$2]}" "$TMP/out"; then
		note_failure "${LABEL[$1]}, $2 pairs, depth $3: heap-pairs printed '$(grep -m1 -E '^(ok|FAIL)' "$TMP/out" || echo nothing)', not '${EXPECTED[$2]}'"
		return 0
	fi
	record "wall.$1.$3.$2" "$ELAPSED"
}

for depth in $DEPTHS; do
	for ((rep = 0; rep < REPS; rep++)); do
		# Rotate the order from one round to the next, so slow drift of
		# the machine does not always favour the same tool.
		for ((k = 0; k < ${#TOOLS[@]}; k++)); do
			tool=${TOOLS[(rep + k) % ${#TOOLS[@]}]}
			measure "$tool" "$N" "$depth"
			measure "$tool" 1 "$depth"
		done
	done
done
rm -rf "$TMP/ht" "$TMP/heap.txt"

# ---- report ------------------------------------------------------------------

# Added cost per pair in microseconds, over the base, for TOOL at DEPTH:
# plain ((tool - base) / N) and net of start-up.
added_us() { # TOOL DEPTH
	calc '1e6 * (a - b) / c' "$(median_of "wall.$1.$2.$N")" "$(median_of "wall.unprofiled.$2.$N")" "$N"
}
net_us() { # TOOL DEPTH
	calc '1e6 * ((a - b) - (c - d)) / '"$((N - 1))" \
		"$(median_of "wall.$1.$2.$N")" "$(median_of "wall.$1.$2.1")" \
		"$(median_of "wall.unprofiled.$2.$N")" "$(median_of "wall.unprofiled.$2.1")"
}
ratio() { # A B -> "A/B x", n/a if either is missing or B is ~0
	if [[ $1 == nan || $2 == nan ]] || awk -v b="$2" 'BEGIN { exit !(b <= 0.001) }'; then
		echo n/a
	else
		fmt %.3fx "$(calc 'a / b' "$1" "$2")"
	fi
}

for depth in $DEPTHS; do
	echo
	echo "== heap tracing, depth $depth: $N malloc(64)+free pairs ($REPS interleaved rounds, medians of wall time) =="
	printf '%-22s %9s %11s %14s %12s %20s\n' tool "wall s" "start-up s" "us/pair added" \
		"us/pair net" "cprof/tool add, net"
	for tool in "${TOOLS[@]}"; do
		if [[ -n ${SKIP[$tool]:-} ]]; then
			if [[ $tool == cprof ]]; then
				printf '%-22s %s\n' "${LABEL[$tool]}" "${SKIP[$tool]}"
			else
				printf '%-22s %9s\n' "${LABEL[$tool]}" skipped
			fi
			continue
		fi
		wall=$(median_of "wall.$tool.$depth.$N")
		start=$(median_of "wall.$tool.$depth.1")
		if [[ $tool == unprofiled ]]; then
			add="(base)" net="(base)" vs=""
		else
			add=$(fmt %.2f "$(added_us "$tool" "$depth")")
			net=$(fmt %.2f "$(net_us "$tool" "$depth")")
			vs=""
			if [[ $tool != cprof && -z ${SKIP[cprof]:-} ]]; then
				vs="$(ratio "$(added_us cprof "$depth")" "$(added_us "$tool" "$depth")"), $(ratio "$(net_us cprof "$depth")" "$(net_us "$tool" "$depth")")"
			fi
		fi
		printf '%-22s %9s %11s %14s %12s %20s\n' "${LABEL[$tool]}" "$(fmt %.3f "$wall")" \
			"$(fmt %.3f "$start")" "$add" "$net" "$vs"
	done
done

echo
echo "== summary ($SECONDS s; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end) =="
echo "(us/pair added = (tool - unprofiled) / N, wall medians; net = the same after taking off each one's 1-pair run)"
printf '%-46s %20s\n' metric measured
for depth in $DEPTHS; do
	for tool in ltrace heaptrack cprof; do
		if [[ -n ${SKIP[$tool]:-} ]]; then
			v=$([[ $tool == cprof ]] && echo failed || echo skipped)
		else
			v="$(fmt '%.2f' "$(added_us "$tool" "$depth")") ($(fmt '%.2f' "$(net_us "$tool" "$depth")") net)"
		fi
		printf '%-46s %20s\n' "${LABEL[$tool]} us/pair, depth $depth" "$v"
	done
	for ref in ltrace heaptrack; do
		if [[ -n ${SKIP[cprof]:-} ]]; then
			v="n/a (cprof failed)"
		elif [[ -n ${SKIP[$ref]:-} ]]; then
			v="n/a ($ref skipped)"
		else
			v="$(ratio "$(added_us cprof "$depth")" "$(added_us "$ref" "$depth")") ($(ratio "$(net_us cprof "$depth")" "$(net_us "$ref" "$depth")") net)"
		fi
		printf '%-46s %20s\n' "cprof/$ref cost per pair, depth $depth" "$v"
	done
done

if ((FAILURES > 0)); then
	echo
	echo "heap.sh: $FAILURES measurement(s) failed; see the FAILED / failed lines above" >&2
	exit 1
fi
exit 0
