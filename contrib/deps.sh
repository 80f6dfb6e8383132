#!/usr/bin/env bash
# Install the Debian packages cprof needs to build, test and benchmark.
# Idempotent: does nothing when everything is already installed.
set -euo pipefail

packages=(
	gcc g++ make pkg-config binutils     # build (g++ for the C++ fixture)
	libunwind-dev libelf-dev libdw-dev   # unwinding and symbols
	libiberty-dev                  # C++ and Rust demangling
	libprotobuf-c-dev protobuf-c-compiler zlib1g-dev   # pprof output
	libreadline-dev libncurses-dev # cprof-attach's console and live view
	tmux                           # tests: drive the console and the live view
	golang-go python3              # tests: go tool pprof reads our files; JSON checks
	chromium fonts-dejavu-core     # tests: the SVG flame graph in a real browser
	# Node.js >= 20 with npm comes with the machine image (NodeSource); the
	# browser test installs playwright-core (pinned, no browser download).
	debuginfod libc6-dbg           # symbol tests: a real debuginfod, libc's debug info
	check                          # unit and end-to-end tests
	linux-perf elfutils time       # reference tools for make bench
	ltrace heaptrack               # reference tools for bench/heap.sh
	valgrind                       # heap tests: totals compared with memcheck's
	libjemalloc2                   # heap fixtures: heap-leak-jemalloc links it
	musl-tools                     # unwind tests: a musl-gcc build (no .eh_frame_hdr)
	procps                         # ps, used by tests and the demo
	xz-utils                       # tests: xz -T2 is a real multi-threaded target
	clang libclang-rt-dev llvm     # make fuzz: libFuzzer and the sanitizer
	                               # runtimes; llvm-symbolizer for reports
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all installed"
	exit 0
fi
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
echo "deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
