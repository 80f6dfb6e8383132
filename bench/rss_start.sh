#!/bin/bash
# cprof-attach's memory at start (issue 15 goal 5: <= 10 MB).
#
#   bash bench/rss_start.sh [BUILD]       # BUILD defaults to build
#
# cprof-attach forks: a parent that watches, and the worker that attaches,
# samples and symbolizes.  For each target it runs `cprof-attach PID -d
# SECONDS` (99 Hz, the default output: folded, inlined frames) and polls
# the worker's /proc/PID/status every 50 ms: VmHWM and VmRSS at 0.2 s
# (attached), at 2 s (the first symbolization done), and at the end (the
# last poll before it exits), with the parent's VmHWM; and the largest
# size of the memfd images of debug files the worker maps
# (symbolize/dwlazy.h; memory not counted in RSS where not mapped) in
# its first 3 s.  Targets:
#   chain     BUILD/fixtures/chain-O0: hot frames in the program, libc only
#             at the bottom of the stacks (__libc_start_main)
#   workload  BUILD/bench/workload-O2 --forever (bench/workload.c)
#   xz        xz -9 of random bytes (hot frames in liblzma), if installed
#   python3   a busy python3 loop, if installed
# each with the separate debug files as installed (/usr/lib/debug, e.g.
# libc6-dbg's) and, as root with unshare(1), with /usr/lib/debug hidden
# by an empty directory bound over it in a private mount namespace.
# Knobs: DURATION [4] (seconds), TARGETS ["chain workload xz python3"], NODEBUG [1]
# (0: skip the runs without /usr/lib/debug).  Exit 1 if a run failed.
set -u
BUILD=${1:-build}
SECONDS_RUN=${DURATION:-4}
TARGETS=${TARGETS:-chain workload xz python3}
NODEBUG=${NODEBUG:-1}
ATTACH=$BUILD/cprof-attach
[[ -x $ATTACH ]] || { echo "no $ATTACH: make BUILD=$BUILD first" >&2; exit 2; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rss_start.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
SRC=$(cd "$(dirname "$0")" && pwd)
WORKLOAD=$BUILD/bench/workload-O2
if [[ $TARGETS == *workload* && ! -x $WORKLOAD ]]; then
	mkdir -p "$BUILD/bench"
	${CC:-gcc} -g -O2 -fomit-frame-pointer -fasynchronous-unwind-tables \
		-pthread "$SRC/workload.c" -o "$WORKLOAD" || exit 1
fi

status_kb() { # PID FIELD
	awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null
}

# The kB of the memfd files PID maps (the symbolizer's images of debug
# files, symbolize/dwlazy.h): memory too, though not in RSS where not
# mapped.  Each file once.
memfd_kb() { # PID
	local f seen=" " kb=0 ino blocks
	for f in /proc/"$1"/map_files/*; do
		[[ $(readlink "$f" 2>/dev/null) == /memfd:* ]] || continue
		read -r ino blocks < <(stat -L -c '%i %b' "$f" 2>/dev/null) ||
			continue
		[[ $seen == *" $ino "* ]] && continue
		seen+="$ino "
		kb=$((kb + blocks / 2))
	done
	echo "$kb"
}

# One run: print "name debug hwm_0.2 rss_0.2 hwm_2 rss_2 memfd hwm_end
# rss_end parent_hwm" (kB).
measure() { # NAME DEBUG CMD...
	local name=$1 debug=$2
	shift 2
	"$@" >/dev/null 2>&1 </dev/null &
	local target=$!
	sleep 0.3
	"$ATTACH" "$target" -d "$SECONDS_RUN" -q -o "$TMP/out.folded" &
	local attach=$! worker= i h02=- r02=- h2=- r2=- m2=- h=- r=- ph=- v
	local t0 t
	t0=$(date +%s%N)
	for ((i = 1; i <= SECONDS_RUN * 20 + 100; i++)); do
		# Read each time: a child of a moment (a fork before the
		# worker's) must not be taken for it.
		v=$(awk '{ print $NF }' \
			"/proc/$attach/task/$attach/children" 2>/dev/null)
		[[ -n $v ]] && worker=$v
		if [[ -n $worker ]]; then
			v=$(status_kb "$worker" VmHWM)
			if [[ -n $v ]]; then
				h=$v
				v=$(status_kb "$worker" VmRSS)
				[[ -n $v ]] && r=$v
				t=$(( ($(date +%s%N) - t0) / 1000000 ))
				[[ $h02 == - ]] && ((t >= 200)) && h02=$h r02=$r
				[[ $h2 == - ]] && ((t >= 2000)) && h2=$h r2=$r
				# The largest seen in the first 3 s (the images
				# go when the modules are let go, after 1-2 s
				# without use).
				if ((t < 3000)); then
					v=$(memfd_kb "$worker")
					[[ $m2 == - ]] || ((v > m2)) && m2=$v
				fi
			fi
		fi
		v=$(status_kb "$attach" VmHWM)
		[[ -n $v ]] && ph=$v
		kill -0 "$attach" 2>/dev/null || break
		sleep 0.05
	done
	wait "$attach"
	local rc=$?
	kill "$target" 2>/dev/null
	wait "$target" 2>/dev/null
	if ((rc != 0)) || [[ ! -s $TMP/out.folded ]]; then
		echo "$name: cprof-attach failed (exit $rc)" >&2
		return 1
	fi
	printf '%-9s %-8s %8s %8s %8s %8s %8s %8s %8s %8s\n' "$name" \
		"$debug" "$h02" "$r02" "$h2" "$r2" "$m2" "$h" "$r" "$ph"
}

run_target() { # NAME DEBUG
	case $1 in
	chain) measure chain "$2" "$BUILD/fixtures/chain-O0" 60 ;;
	workload) measure workload "$2" "$WORKLOAD" --forever ;;
	xz) command -v xz >/dev/null || return 0
		measure xz "$2" sh -c 'exec xz -9 -T1 < /dev/urandom > /dev/null' ;;
	python3) command -v python3 >/dev/null || return 0
		measure python3 "$2" python3 -c 'while True: sum(i * i for i in range(1000))' ;;
	*) echo "unknown target $1" >&2; return 1 ;;
	esac
}

if [[ ${RSS_START_INNER:-} == 1 ]]; then
	# In the private mount namespace: /usr/lib/debug is empty here.
	mkdir "$TMP/empty" && mount --bind "$TMP/empty" /usr/lib/debug || exit 1
	fail=0
	for t in $TARGETS; do run_target "$t" none || fail=1; done
	exit $fail
fi

echo "cprof-attach worker memory (kB), $SECONDS_RUN s at 99 Hz; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "/usr/lib/debug: $(find /usr/lib/debug -name '*.debug' 2>/dev/null | wc -l) debug files"
printf '%-9s %-8s %8s %8s %8s %8s %8s %8s %8s %8s\n' target debug \
	hwm0.2s rss0.2s hwm2s rss2s memfd hwm_end rss_end parent
fail=0
for t in $TARGETS; do run_target "$t" usr-lib || fail=1; done
if [[ $NODEBUG == 1 ]]; then
	if [[ $(id -u) == 0 ]] && command -v unshare >/dev/null; then
		RSS_START_INNER=1 unshare -m --propagation private \
			bash "$0" "$BUILD" || fail=1
	else
		echo "(runs without /usr/lib/debug skipped: need root and unshare)"
	fi
fi
exit $fail
