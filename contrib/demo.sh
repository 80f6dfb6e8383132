#!/usr/bin/env bash
# make demo: install what is missing, build, profile the bundled demo
# workload with cprof-attach, print the hottest stacks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash contrib/deps.sh
make -s all
out=build/demo.folded
echo "== cprof-attach -F 199 -d 3 -o $out -- build/fixtures/demo 4"
build/cprof-attach -F 199 -d 3 -o "$out" -- build/fixtures/demo 4
echo
echo "== hottest stacks (samples, stack root first)"
sort -t' ' -k2 -nr "$out" 2>/dev/null | awk '{n=$NF; $NF=""; printf "%6d  %s\n", n, $0}' | sort -nr | head -10
echo
echo "profile: $PWD/$out"
