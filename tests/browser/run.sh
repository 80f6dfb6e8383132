#!/usr/bin/env bash
# The interactive SVG flame graph in a real browser: draws
# fixtures/data/browser.folded with BUILD/cprof, then flamegraph.test.mjs
# drives it in headless Debian Chromium through playwright-core (zoom, reset,
# search, match case, hover) and leaves a screenshot of the zoomed graph in
# BUILD/artifacts/flamegraph.png, next to the SVG it tested.
#
# Then the real speedscope (its npm package's release build) opens what
# BUILD/cprof-attach writes of python3 running tests/browser/phases.py: a
# speedscope file (samples in time order, weights in time) and a Chrome
# trace (no B/E it cannot pair, process and thread names); see
# speedscope.test.mjs.  The files stay in BUILD/artifacts.
#
# Usage: tests/browser/run.sh [BUILD]      (default: $BUILD, else "build")
#
# Needs Debian's chromium (/usr/bin/chromium, or set CHROMIUM), Node.js >= 20,
# npm and python3.  Without them it fails, it never skips: CI installs them
# (contrib/deps.sh).  playwright-core and speedscope, pinned in
# package-lock.json, go to BUILD/browser/node_modules (npm ci, only when
# missing or the lock changed), so builds in different directories never
# share one; it never downloads a browser.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

build=${1:-${BUILD:-build}}
chromium=${CHROMIUM:-/usr/bin/chromium}
cprof=$build/cprof
modules=$build/browser
artifacts=$build/artifacts
folded=fixtures/data/browser.folded

fail() {
	echo "tests/browser: FAIL: $*" >&2
	exit 1
}

[ -x "$cprof" ] ||
	fail "no $cprof: build it first (make BUILD=$build all)"
[ -x "$chromium" ] ||
	fail "no Chromium at $chromium: install Debian's (apt-get install -y chromium, as contrib/deps.sh does) or set CHROMIUM to one"
command -v node >/dev/null ||
	fail "node not found: install Node.js >= 20 with its npm (the machine image ships NodeSource's nodejs 20; Debian bookworm's nodejs is 18, too old)"
node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' ||
	fail "node $(node --version) is too old: playwright-core needs Node.js >= 20"

# playwright-core, exactly as package-lock.json pins it.  The stamp is the
# lock that the last successful npm ci installed.
stamp=$modules/node_modules/.cprof-package-lock.json
if ! cmp -s "$here/package-lock.json" "$stamp" 2>/dev/null; then
	command -v npm >/dev/null ||
		fail "npm not found: it installs playwright-core (install npm with Node.js)"
	mkdir -p "$modules"
	(
		# Two runs in one build directory must not install over each other.
		command -v flock >/dev/null && flock 9
		if ! cmp -s "$here/package-lock.json" "$stamp" 2>/dev/null; then
			# (set -e does not reach in here: it is the left of an ||.)
			cp "$here/package.json" "$here/package-lock.json" "$modules/" || exit 1
			echo "tests/browser: npm ci in $modules"
			# --ignore-scripts and the skip variable: nothing may fetch a
			# browser; the test uses Debian's.
			(cd "$modules" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
				npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) ||
				exit 1
			cp "$here/package-lock.json" "$stamp" || exit 1
		fi
	) 9>"$modules/.npm-ci.lock" || fail "npm ci of playwright-core failed (see above)"
fi

mkdir -p "$artifacts"
svg=$artifacts/flamegraph.svg
png=$artifacts/flamegraph.png
rm -f "$svg" "$png"
"$cprof" flamegraph "$folded" -o "$svg" || fail "cprof flamegraph $folded failed"

# The test has its own 120 s watchdog; this one also covers a hung node.
rc=0
timeout 180 node "$here/flamegraph.test.mjs" --svg "$svg" --screenshot "$png" \
	--chromium "$chromium" --modules "$modules" || rc=$?
if [ "$rc" -ne 0 ]; then
	echo "tests/browser: FAIL (exit $rc); the SVG is $svg" >&2
	exit 1
fi
[ -s "$png" ] || fail "no screenshot at $png"
echo "tests/browser: screenshot $png"

# speedscope: what cprof-attach writes, opened in the real thing.
attach=$build/cprof-attach
release=$modules/node_modules/speedscope/dist/release
[ -x "$attach" ] ||
	fail "no $attach: build it first (make BUILD=$build all)"
[ -f "$release/index.html" ] ||
	fail "no speedscope release build at $release (npm ci of package-lock.json)"
command -v python3 >/dev/null || fail "python3 not found (the profiled program)"
speedscope=$artifacts/phases.speedscope.json
trace=$artifacts/phases.trace.json
rm -f "$speedscope" "$trace"
"$attach" -q -F 199 -o "$speedscope" -- python3 "$here/phases.py" zhz 0.6 ||
	fail "cprof-attach -o $speedscope -- python3 phases.py failed"
"$attach" -q -F 199 --format trace -o "$trace" -- python3 "$here/phases.py" z 0.6 ||
	fail "cprof-attach --format trace -- python3 phases.py failed"
rc=0
timeout 180 node "$here/speedscope.test.mjs" --speedscope "$speedscope" \
	--trace "$trace" --release "$release" --chromium "$chromium" \
	--modules "$modules" || rc=$?
if [ "$rc" -ne 0 ]; then
	echo "tests/browser: speedscope FAIL (exit $rc); the files are $speedscope and $trace" >&2
	exit 1
fi
