#!/usr/bin/env bash
# bench/svg.sh [BUILD]: the flame graph benchmark (folded -> SVG).
#
# Builds bench/svg_bench.c against BUILD/libcprof.a into BUILD/bench/,
# generates 1,000,000 samples over 100,000 distinct stacks (depth 10-60,
# bench/svg_gen.h) as folded text, then times folded -> SVG in-process
# (svg_bench svg) and through the CLI (cprof flamegraph) when it is built.
# Goal: <= 1 s, <= 200 MB peak RSS, <= 10 MB of SVG at the default minwidth.
set -euo pipefail
BUILD=${1:-build}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$SRC")
CC=${CC:-cc}
mkdir -p "$BUILD/bench"
PKGS="libunwind-ptrace libunwind-generic libdw libelf libprotobuf-c zlib"
# shellcheck disable=SC2046
$CC -std=gnu11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -I"$ROOT/include" -I"$SRC" \
	-o "$BUILD/bench/svg_bench" "$SRC/svg_bench.c" "$BUILD/libcprof.a" \
	$(pkg-config --libs $PKGS) -liberty -pthread
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
"$BUILD/bench/svg_bench" gen "$DIR/big.folded"
echo "folded input: $(du -h "$DIR/big.folded" | cut -f1), $(wc -l < "$DIR/big.folded") lines"
echo "== in-process (cp_read_folded + cp_write_svg)"
"$BUILD/bench/svg_bench" svg "$DIR/big.folded" "$DIR/big.svg"
if [[ -x $BUILD/cprof && -x /usr/bin/time ]]; then
	echo "== cprof flamegraph (wall s, peak KB)"
	/usr/bin/time -f "%e s %M KB" "$BUILD/cprof" flamegraph "$DIR/big.folded" -o "$DIR/cli.svg"
	echo "svg size $(stat -c %s "$DIR/cli.svg") bytes"
fi
if [[ -x $BUILD/cprof && -x /usr/bin/time ]]; then
	for out in big.pb.gz big.speedscope.json big.copy.folded; do
		echo "== cprof convert -o $out (wall s, peak KB)"
		/usr/bin/time -f "%e s %M KB" "$BUILD/cprof" convert "$DIR/big.folded" -o "$DIR/$out"
		echo "size $(stat -c %s "$DIR/$out") bytes"
	done
fi
