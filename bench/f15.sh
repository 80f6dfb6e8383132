#!/usr/bin/env bash
# bench/f15.sh NAME=BUILD [NAME=BUILD...]: cprof-attach's own cost per
# sample, per system call kind, for each build, interleaved (issue 15).
#
# For each repetition and each configuration, one target is started and
# every build samples it in turn (order rotated per repetition), then
# bench's ptrace_floor (interrupt + wait + getregs + cont, its own CPU per
# round trip) runs on one busy thread of the same target.
# Configurations (CONFIGS, default all): c999 c99 (chain-O0, CPU mode),
# d30 (bench/workload.c, 1 thread at depth 30, 999 Hz),
# m999 (8 busy + 64 sleeping, CPU mode), w99 (same, --wall), b1 b2 b8
# (N busy threads at 999 Hz), w64 w256 (--wall at 99 Hz, 8 busy + N-8
# sleeping).  Output: one line per run in $OUT/runs.tsv, medians on stdout.
# Environment: REPS [3], SECONDS_ [3], OUT [/tmp/f15.out], EXTRA (more
# cprof-attach options).
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPS=${REPS:-3}
SECS=${SECONDS_:-3}
OUT=${OUT:-/tmp/f15.out}
CONFIGS=${CONFIGS:-c999 c99 d30 m999 w99 b1 b2 b8 w64 w256}
mkdir -p "$OUT"
FIRST=${FIX:-${1#*=}}
FIRST=${FIRST%/}
MIX=$FIRST/bench/mixthreads
FLOOR=$FIRST/bench/ptrace_floor
mkdir -p "$FIRST/bench"
gcc -std=gnu11 -D_GNU_SOURCE -O2 -g -fno-omit-frame-pointer -pthread "$SRC/mixthreads.c" -o "$MIX" || exit 1
gcc -std=gnu11 -D_GNU_SOURCE -O2 -g "$SRC/ptrace_floor.c" -o "$FLOOR" || exit 1
WORKLOAD=$FIRST/bench/workload-O2
gcc -std=gnu11 -O2 -g -fomit-frame-pointer -fasynchronous-unwind-tables -pthread "$SRC/workload.c" -o "$WORKLOAD" || exit 1
CHAIN=$FIRST/fixtures/chain-O0
KINDS=(wait4 ppoll ptrace read pread64 rt_sigprocmask process_vm_readv rt_sigtimedwait openat close futex clock_nanosleep write)
EV=task-clock,context-switches,raw_syscalls:sys_enter
for k in "${KINDS[@]}"; do EV+=,syscalls:sys_enter_$k; done

start_target() { # config -> sets TPID, BUSYTID, ARGS
	local cfg=$1
	case $cfg in
	c999|c99) "$CHAIN" 3600 >"$OUT/ready" & ;;
	d30) "$WORKLOAD" --forever --threads 1 --depth 30 >"$OUT/ready" & ;;
	m999|w99) "$MIX" 8 64 >"$OUT/ready" & ;;
	b1) "$MIX" 1 0 >"$OUT/ready" & ;;
	b2) "$MIX" 2 0 >"$OUT/ready" & ;;
	b8) "$MIX" 8 0 >"$OUT/ready" & ;;
	w64) "$MIX" 8 56 >"$OUT/ready" & ;;
	w256) "$MIX" 8 248 >"$OUT/ready" & ;;
	esac
	TPID=$!
	for _ in $(seq 100); do grep -q ready "$OUT/ready" 2>/dev/null && break; sleep 0.05; done
	# A busy thread: the one with the most CPU time.
	BUSYTID=$(for t in /proc/$TPID/task/*; do echo "$(awk '{print $14+$15}' "$t/stat") ${t##*/}"; done | sort -n | tail -1 | cut -d' ' -f2)
	case $cfg in
	c999|m999|b1|b2|b8|d30) ARGS=(-F 999) ;;
	c99) ARGS=(-F 99) ;;
	w99|w64|w256) ARGS=(--wall -F 99) ;;
	esac
}

rm -rf "$OUT/runs"; mkdir -p "$OUT/runs"
: >"$OUT/floor.tsv"

for ((rep = 1; rep <= REPS; rep++)); do
	for cfg in $CONFIGS; do
		start_target "$cfg"
		builds=("$@")
		# rotate the order per repetition
		n=${#builds[@]}
		for ((i = 0; i < n; i++)); do
			spec=${builds[$(((i + rep) % n))]}
			name=${spec%%=*} b=${spec#*=}
			perf stat -x, -o "$OUT/stat" -e "$EV" -- "$b/cprof-attach" -v ${EXTRA:-} "${ARGS[@]}" -d "$SECS" -o /dev/null "$TPID" 2>"$OUT/err" >/dev/null
			tag=$OUT/runs/$cfg.$name.$rep
			cp "$OUT/err" "$tag.err"; cp "$OUT/stat" "$tag.stat"; cut -d' ' -f1 /proc/loadavg >"$tag.load"
			grep -q 'samples from' "$OUT/err" || { echo "run failed: $name $cfg" >&2; cat "$OUT/err" >&2; }
		done
		gap=1001; [[ ${ARGS[*]} == *99* && ${ARGS[*]} != *999* ]] && gap=10101
		cnt=${FLOOR_COUNT:-1000}; [[ $gap == 10101 ]] && cnt=$((cnt / 5))
		fl=$("$FLOOR" "$BUSYTID" "$cnt" "$gap" getregs 2>&1 | tr '\n' ' ')
		echo -e "$cfg\t$rep\t$fl" >>"$OUT/floor.tsv"
		kill "$TPID"; wait "$TPID" 2>/dev/null
	done
done
python3 "$SRC/f15_summary.py" "$OUT"
