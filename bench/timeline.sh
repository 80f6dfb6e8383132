#!/usr/bin/env bash
# bench/timeline.sh [BUILD]: the timeline benchmark (raw samples -> events
# and -> Chrome trace JSON with cprof timeline).
#
# Builds bench/timeline_gen.c into BUILD/bench/, generates raw samples of
# 8 threads at depth 30 (bench/timeline_gen.c: about 2.8 events per
# sample, frame names of 8-16 characters) for each of SIZES (default
# 1,000,000 and 10,000,000 samples), and times `cprof timeline` on each,
# to events and to trace JSON, with /usr/bin/time: wall time, CPU time
# (user + system), samples per CPU second, peak RSS.
#
# Goal: >= 2,000,000 samples per second per core, and peak RSS flat in
# the number of samples (the largest size within 10 % or 1 MB of the
# smallest).
#
# Each conversion runs REPS times (default 3) and the run with the least
# CPU time is shown: on a shared machine the others only add noise.  User
# time is the parser, the engine and the writers; system time is the
# kernel copying the text in and out (about 430 bytes in and 100-200 out
# per sample), which on some VMs costs as much.  The output is written
# with -o to a file in OUTDIR (default: beside the input, in TMPDIR), as
# a user would; the fsync of cp_output's commit counts in wall time, not
# in CPU time.  OUTDIR=/dev/shm takes the disk out of the figures.
#
# Knobs: SIZES="1000000 10000000", THREADS=8, DEPTH=30, FORMATS="events
# trace", REPS=3, TMPDIR (needs about 500 bytes per sample free), OUTDIR.
set -euo pipefail
BUILD=${1:-build}
[[ ${QUICK:-0} == 1 ]] && SIZES=${SIZES:-1000000} # make bench QUICK=1
SIZES=${SIZES:-"1000000 10000000"}
THREADS=${THREADS:-8}
DEPTH=${DEPTH:-30}
FORMATS=${FORMATS:-"events trace"}
REPS=${REPS:-3}
GOAL=2000000
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CC=${CC:-cc}

if [[ ! -x $BUILD/cprof ]]; then
	echo "timeline.sh: $BUILD/cprof is not built (make BUILD=$BUILD)" >&2
	exit 1
fi
if [[ ! -x /usr/bin/time ]]; then
	echo "timeline.sh: /usr/bin/time is missing (apt-get install time); skipped" >&2
	exit 0
fi
mkdir -p "$BUILD/bench"
$CC -std=gnu11 -O2 -g -Wall -Wextra -o "$BUILD/bench/timeline_gen" "$SRC/timeline_gen.c"

DIR=$(mktemp -d)
trap 'rm -rf "$DIR"; rm -f "${OUTDIR:-$DIR}"/timeline-bench.$$.*' EXIT
largest=0
for n in $SIZES; do ((n > largest)) && largest=$n; done
need_kb=$((largest * 500 / 1024))
OUTDIR=${OUTDIR:-$DIR}
avail_kb=$(df -Pk "$DIR" | awk 'NR == 2 { print $4 }')
if ((avail_kb < need_kb)); then
	echo "timeline.sh: $DIR has $((avail_kb / 1024)) MB free, $((need_kb / 1024)) MB needed; set TMPDIR or SIZES" >&2
	exit 1
fi

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
rate_of() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }'; }
printf '%-9s %-7s %7s %7s %7s %14s %14s %9s %8s\n' samples format "wall s" "user s" "sys s" \
	"samples/cpu-s" "samples/user-s" "peak KB" "out MB"
declare -A rss rate
failed=0
for n in $SIZES; do
	raw=$DIR/$n.raw
	"$BUILD/bench/timeline_gen" "$n" "$THREADS" "$DEPTH" > "$raw"
	# Written back now, not by the kernel while we measure.
	sync "$raw" 2>/dev/null || sync
	bytes=$(stat -c %s "$raw")
	echo "$n samples: $((bytes / 1048576)) MB of raw text, $((bytes / n)) bytes a sample"
	for format in $FORMATS; do
		out=$OUTDIR/timeline-bench.$$.$format
		best= maxpeak=0
		for ((rep = 0; rep < REPS; rep++)); do
			if ! /usr/bin/time -f '%e %U %S %M' -o "$DIR/time" \
				"$BUILD/cprof" timeline --format "$format" "$raw" -o "$out"; then
				echo "timeline.sh: cprof timeline --format $format failed" >&2
				failed=1
				break
			fi
			read -r w u s p < "$DIR/time"
			c=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')
			if [[ -z $best ]] || awk -v a="$c" -v b="$cpu" 'BEGIN { exit !(a < b) }'; then
				best=1 wall=$w user=$u sys=$s cpu=$c
			fi
			((p > maxpeak)) && maxpeak=$p # the largest of the runs
		done
		[[ -n $best ]] || continue
		peak=$maxpeak
		per_cpu=$(rate_of "$n" "$cpu")
		printf '%-9s %-7s %7s %7s %7s %14s %14s %9s %8s\n' "$n" "$format" "$wall" "$user" \
			"$sys" "$per_cpu" "$(rate_of "$n" "$user")" "$peak" \
			"$(($(stat -c %s "$out") / 1048576))"
		rss[$n,$format]=$peak
		rate[$n,$format]=$per_cpu
		rm -f "$out"
	done
	rm -f "$raw"
done

echo
printf '%-44s %-26s %-22s %s\n' metric measured goal met
smallest=${SIZES%% *}
for format in $FORMATS; do
	for n in $SIZES; do
		r=${rate[$n,$format]:-0}
		met=no
		((r >= GOAL)) && met=yes
		printf '%-44s %-26s %-22s %s\n' "samples per CPU second, $format, $n" "$r" ">= $GOAL" "$met"
	done
	small=${rss[$smallest,$format]:-0}
	large=${rss[$largest,$format]:-0}
	met=no
	if ((large <= small + 1024 || large * 10 <= small * 11)); then met=yes; fi
	printf '%-44s %-26s %-22s %s\n' "peak RSS, $format, $smallest -> $largest" "$small KB -> $large KB" "flat (10 % or 1 MB)" "$met"
done
exit $failed
