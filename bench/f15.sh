#!/usr/bin/env bash
# bench/f15.sh NAME=BUILD [NAME=BUILD]: the old entry point of issue 15's
# per-sample measurements, kept for the command lines in the notes; it runs
# bench/cost.sh (the one documented entry point, see bench/README.md) on
# the sampling configurations only: the build named base (or else the
# second) as BASE, the other as BUILD.  Environment as before: REPS [3], SECONDS_ [3] (cost.sh's
# SECS), CONFIGS [c999 c99 d30 m999 w99 b1 b2 b8 w64 w256], OUT, EXTRA.
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ $# -lt 1 || $# -gt 2 ]]; then
	echo "usage: bash bench/f15.sh NAME=BUILD [NAME=BUILD]   (now: bash bench/cost.sh BUILD, BASE=DIR)" >&2
	exit 2
fi
first="" base=""
for spec in "$@"; do
	if [[ ${spec%%=*} == base || -n $first ]]; then base=${spec#*=}; else first=${spec#*=}; fi
done
[[ -n $first ]] || { first=$base; base=""; }
REPS=${REPS:-3} SECS=${SECONDS_:-3} CONFIGS=${CONFIGS:-c999 c99 d30 m999 w99 b1 b2 b8 w64 w256} \
	BASE=$base GOALS="1 2" exec bash "$SRC/cost.sh" "$first"
