#!/usr/bin/env bash
# make check: every test suite in turn, then the browser tests.  Each
# suite's output goes to the terminal and to BUILD/artifacts/tests/NAME.log;
# at the end the suites that failed are named, each with its failures'
# own lines (check's FILE:LINE:F: and :E: messages, with the lines that
# follow them), so that the tail of a CI log says what failed and why.
#
#   bash tests/run.sh BUILD TEST...
set -uo pipefail
build=$1
shift
export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-60}
logs=$build/artifacts/tests
mkdir -p "$logs"
failed=()
for t in "$@"; do
	name=${t##*/}
	echo "== $t"
	"$t" 2>&1 | tee "$logs/$name.log" || failed+=("$name")
done
echo "== tests/browser/run.sh (the SVG in headless Chromium)"
bash tests/browser/run.sh "$build" 2>&1 | tee "$logs/browser.log" ||
	failed+=(browser)
if ((${#failed[@]} == 0)); then
	echo "all test suites passed"
	exit 0
fi
echo "failed test suites: ${failed[*]}"
for name in "${failed[@]}"; do
	echo "-- $name (all of it in $logs/$name.log):"
	# A failure's message, and the 12 lines after it (a message may run
	# over several: an example's stderr).  Else the log's last lines.
	awk '/^[^ ]+:[0-9]+:[EF]:/ { left = 13 } left > 0 { print; left-- }' \
		"$logs/$name.log" | tail -n 60 | grep . ||
		tail -n 20 "$logs/$name.log"
done
exit 1
