#!/usr/bin/env bash
# Run libFuzzer harnesses (make fuzz; tests/fuzz/README.md):
#
#   tests/fuzz/run.sh BUILD SECONDS JOBS NAME...
#
# runs BUILD/fuzz/fuzz_NAME for SECONDS each, JOBS at a time, from the
# committed seeds tests/fuzz/corpus/NAME/ (read only) and what earlier runs
# found, BUILD/fuzz/corpus/NAME/ (new inputs go there), with the dictionary
# tests/fuzz/NAME.dict and the extra libFuzzer flags of tests/fuzz/NAME.flags
# when they exist.  Every input that fails (crash, sanitizer report, failed
# check, leak, timeout, out of memory) is written to BUILD/fuzz/crashes/NAME/
# and makes the exit status 1, after a summary that says where it is and
# how to reproduce it.  The full log of each run is BUILD/fuzz/logs/NAME.log.
set -uo pipefail

if [ $# -lt 3 ]; then
	echo "usage: $0 BUILD SECONDS JOBS NAME..." >&2
	exit 2
fi
build=$1 seconds=$2 jobs=$3
shift 3
src=$(cd "$(dirname "$0")" && pwd)
if [ $# -eq 0 ]; then
	echo "fuzz: no harnesses (tests/fuzz/fuzz_*.c)" >&2
	exit 2
fi
case $seconds in '' | *[!0-9]*) echo "fuzz: FUZZ_SECONDS must be a whole number" >&2; exit 2 ;; esac
case $jobs in '' | *[!0-9]* | 0) echo "fuzz: FUZZ_JOBS must be a number >= 1" >&2; exit 2 ;; esac

# Sanitizer reports: symbolized, and every error is fatal.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_one() {
	local name=$1
	local bin=$build/fuzz/fuzz_$name
	local work=$build/fuzz/corpus/$name crashes=$build/fuzz/crashes/$name
	local log=$build/fuzz/logs/$name.log
	mkdir -p "$work" "$crashes" "$(dirname "$log")"
	local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048
		-print_final_stats=1 -artifact_prefix="$crashes/")
	[ -f "$src/$name.dict" ] && args+=(-dict="$src/$name.dict")
	# shellcheck disable=SC2207
	[ -f "$src/$name.flags" ] && args+=($(grep -v '^#' "$src/$name.flags"))
	args+=("$work")
	[ -d "$src/corpus/$name" ] && args+=("$src/corpus/$name")
	if [ ! -x "$bin" ]; then
		echo "no harness $bin (make fuzz-build)" >"$log"
		return 1
	fi
	"$bin" "${args[@]}" >"$log" 2>&1
}

# One line per harness: its numbers from libFuzzer's last status line and
# final stats, or what went wrong and where the input is.
report() {
	local name=$1 status=$2
	local log=$build/fuzz/logs/$name.log
	local last runs rate
	last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	local cov ft corp
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
	ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
	corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
	if [ "$status" -eq 0 ]; then
		printf 'fuzz %-12s ok: %s runs in %ss, %s exec/s, cov: %s ft: %s corpus: %s\n' \
			"$name" "${runs:-?}" "$seconds" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}"
		return
	fi
	printf 'fuzz %-12s FAILED (exit %s) after %s runs; from its log, %s:\n' \
		"$name" "$status" "${runs:-?}" "$log"
	# From the first line of the report (a failed check, a sanitizer or
	# libFuzzer error) on; the tail of the log when there is none.
	local first
	first=$(grep -n -m 1 -E 'check failed:|runtime error:|==ERROR:|ERROR: libFuzzer|^ALARM:|Sanitizer:' "$log" | cut -d: -f1)
	if [ -n "$first" ]; then
		tail -n "+$first" "$log" | head -n 80
	else
		tail -n 40 "$log"
	fi | grep -v -E '^(stat::|INFO:)' | sed 's/^/    /'
	local unit
	unit=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
	if [ -n "$unit" ]; then
		echo "  the failing input: $unit"
		echo "  reproduce:         $build/fuzz/fuzz_$name $unit"
		echo "  once fixed, keep it as a regression seed:"
		echo "                     cp $unit tests/fuzz/corpus/$name/"
	fi
}

declare -A pid_name=()
failed=()
finish_one() {
	local pid status
	wait -n -p pid "${!pid_name[@]}"
	status=$?
	local name=${pid_name[$pid]}
	unset "pid_name[$pid]"
	report "$name" "$status"
	[ "$status" -eq 0 ] || failed+=("$name")
}

echo "fuzz: $# harness(es), ${seconds}s each, $jobs at a time; logs in $build/fuzz/logs/"
for name in "$@"; do
	while [ ${#pid_name[@]} -ge "$jobs" ]; do
		finish_one
	done
	run_one "$name" &
	pid_name[$!]=$name
done
while [ ${#pid_name[@]} -gt 0 ]; do
	finish_one
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: failed: ${failed[*]}"
	exit 1
fi
echo "fuzz: all $# harness(es) passed"
