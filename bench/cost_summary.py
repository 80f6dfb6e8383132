#!/usr/bin/env python3
"""bench/cost.sh's report: medians of its raw results, the detail of the
sampling runs (per stop, system calls by kind) and the goal table of issue
15, each figure beside its reference from the same invocation.

    cost_summary.py OUT PAIRS THREAD_PAIRS

OUT holds runs/CFG.BUILD.REP.{err,stat,load} (cprof-attach -v under perf
stat), floor.tsv (bench/ptrace_floor getregs, under perf stat) and
values.tsv (KEY<TAB>VALUE lines, several per key).  Exit 1 if nothing was
measured."""
import glob
import math
import os
import re
import statistics
import sys
from collections import defaultdict

NAN = float("nan")
out, PAIRS, THREAD_PAIRS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else NAN


def spread(xs):
    xs = [x for x in xs if x == x]
    return (min(xs), max(xs)) if xs else (NAN, NAN)


def f(x, fmt="%.1f"):
    return "n/a" if x != x else fmt % x


# ---- raw values ---------------------------------------------------------------
values = defaultdict(list)
if os.path.exists(out + "/values.tsv"):
    for line in open(out + "/values.tsv"):
        k, _, v = line.rstrip("\n").partition("\t")
        try:
            values[k].append(float(v))
        except ValueError:
            values[k].append(NAN)


def V(key):
    return med(values.get(key, []))


# ---- sampling runs (bench/f15.sh's parsing) ------------------------------------
runs = defaultdict(list)
no_stop_count = set()  # builds whose -v has no "N stops" line (before f4817ea)
for err in glob.glob(out + "/runs/*.err"):
    tag = err[:-4]
    cfg, build, rep = os.path.basename(tag).split(".")
    text = open(err).read()
    r = {}
    m = re.search(r"(\d+) samples from .*?(\d+) of (\d+) ticks missed", text)
    if not m:
        continue
    r["samples"], r["missed"], r["ticks"] = (float(m.group(i)) for i in (1, 2, 3))
    m = re.search(r"stopped per sample: median ([0-9.]+) us", text)
    r["stopped"] = float(m.group(1)) if m else NAN
    m = re.search(r"stop latency .*?: median ([0-9.]+) us", text)
    r["latency"] = float(m.group(1)) if m else NAN
    m = re.search(r"(\d+) stops; our CPU", text)
    r["stops"] = float(m.group(1)) if m else r["samples"]
    # samples without a stop (the clocks' copies): figures per sample
    copies = re.search(r"(\d+) samples, (\d+) of them by stops; our CPU", text)
    if copies:
        r["stops"] = float(copies.group(1))
    elif not m:
        no_stop_count.add(build)
    m = re.search(r"\(([0-9.]+) us on the sampling thread\)", text)
    r["thread_us"] = float(m.group(1)) if m else NAN
    m = re.search(r"([0-9.]+) system calls per stop, ([0-9.]+) per sample, on the sampling thread", text)
    r["thr_sysc"], r["thr_sysc_sample"] = (float(m.group(1)), float(m.group(2))) if m else (NAN, NAN)
    # samples without a stop (the clocks' copies): one figure, per sample
    m = re.search(r"([0-9.]+) system calls per sample, on the sampling thread", text)
    if m:
        r["thr_sysc"] = r["thr_sysc_sample"] = float(m.group(1))
    m = re.search(r"tick: wake-up after its deadline median ([0-9.]+) us", text)
    r["late"] = float(m.group(1)) if m else NAN
    ev = {}
    if os.path.exists(tag + ".stat"):
        for line in open(tag + ".stat"):
            x = line.strip().split(",")
            if len(x) > 3 and x[0] and x[0][0].isdigit():
                ev[x[2]] = float(x[0])
    r["ev"] = ev
    r["load"] = float(open(tag + ".load").read()) if os.path.exists(tag + ".load") else NAN
    stops = max(1.0, r["stops"])
    taken = r["ticks"] - r["missed"]
    r["taken"] = 100.0 * taken / r["ticks"] if r["ticks"] else NAN
    r["cpu"] = ev.get("task-clock", NAN) * 1000 / stops
    r["sysc"] = ev.get("raw_syscalls:sys_enter", NAN) / stops
    r["csw"] = ev.get("context-switches", NAN) / stops
    r["cpu_tick"] = ev.get("task-clock", NAN) * 1000 / max(1.0, taken)
    runs[(cfg, build)].append(r)

floors = defaultdict(list)
if os.path.exists(out + "/floor.tsv"):
    for line in open(out + "/floor.tsv"):
        cfg, rep, text = line.rstrip("\n").split("\t")
        m = re.search(r"round_trip_us median ([0-9.]+).*cpu_us_per_round_trip ([0-9.]+) "
                      r"csw_per_round_trip ([0-9.]+).*sysc_per_round_trip ([0-9.]+)", text)
        if m:
            floors[cfg].append(dict(zip(("rt", "cpu", "csw", "sysc"), (float(x) for x in m.groups()))))


tickers = defaultdict(list)
if os.path.exists(out + "/ticker.tsv"):
    for line in open(out + "/ticker.tsv"):
        cfg, rep, text = line.rstrip("\n").split("\t")
        m = re.search(r"taken ([0-9.]+)", text)
        if m:
            tickers[cfg].append(float(m.group(1)))


def R(cfg, build, key):
    return med([r[key] for r in runs.get((cfg, build), [])])


def RS(cfg, build, key):
    return spread([r[key] for r in runs.get((cfg, build), [])])


def FL(cfg, key):
    return med([x[key] for x in floors.get(cfg, [])])


builds = sorted({b for _, b in runs} | {k.split(".")[-1] for k in values if k.startswith(("churn.", "stackmem.", "rss_start."))},
                key=lambda b: (b != "new", b))
has_base = "base" in builds or any(k.endswith(".base") or ".base." in k for k in values)

if runs:
    kinds = sorted({k.split("sys_enter_")[1] for rs in runs.values() for r in rs
                    for k in r["ev"] if "sys_enter_" in k})
    order = ["wait4", "ppoll", "epoll_pwait2", "ptrace", "read", "pread64", "rt_sigprocmask",
             "process_vm_readv", "rt_sigtimedwait", "openat", "close", "futex",
             "clock_nanosleep", "write"]
    kinds = [k for k in order if k in kinds] + [k for k in kinds if k not in order]
    print("sampling runs, per stop, medians over repetitions (cpu_us: perf stat task-clock of cprof-attach,")
    print("start-up and symbolization included; thr_us: the sampling thread alone; taken% = 1 - missed/scheduled):")
    hdr = ["cfg", "build", "n", "stops", "taken%", "stop_us", "lat_us", "late_us", "cpu_us", "thr_us",
           "cpu_us/tick", "csw", "sysc", "thr_sysc"] + kinds + ["other", "load"]
    print("  " + " ".join("%-8s" % h if i < 2 else "%7s" % h[:7] for i, h in enumerate(hdr)))
    for (cfg, build), rs in sorted(runs.items(), key=lambda kv: (kv[0][0], kv[0][1] != "new")):
        def per(e):
            return med([r["ev"].get(e, 0) / max(1, r["stops"]) for r in rs])
        vals = [cfg, build, str(len(rs)), "%.0f" % med([r["stops"] for r in rs]),
                f(R(cfg, build, "taken"), "%.2f"), f(R(cfg, build, "stopped")),
                f(R(cfg, build, "latency")), f(R(cfg, build, "late")), f(R(cfg, build, "cpu")),
                f(R(cfg, build, "thread_us")), f(R(cfg, build, "cpu_tick")),
                f(R(cfg, build, "csw"), "%.2f"), f(R(cfg, build, "sysc")), f(R(cfg, build, "thr_sysc"))]
        vals += ["%.2f" % per("syscalls:sys_enter_" + k) for k in kinds]
        vals.append("%.2f" % med([(r["ev"].get("raw_syscalls:sys_enter", 0) - sum(
            r["ev"].get("syscalls:sys_enter_" + k, 0) for k in kinds)) / max(1, r["stops"]) for r in rs]))
        vals.append(f(med([r["load"] for r in rs])))
        print("  " + " ".join("%-8s" % v if i < 2 else "%7s" % v for i, v in enumerate(vals)))
    if floors:
        print("ptrace_floor getregs on the busy thread, per round trip (interrupt, wait, getregs, cont, sleep):")
        for cfg in sorted(floors):
            print("  %-8s round trip %s us, CPU %s us, %s context switches, %s system calls (n=%d)" % (
                cfg, f(FL(cfg, "rt")), f(FL(cfg, "cpu")), f(FL(cfg, "csw"), "%.2f"),
                f(FL(cfg, "sysc"), "%.2f"), len(floors[cfg])))
    print()

# ---- the goal table -------------------------------------------------------------
rows = []


def ratio(a, b):
    """a / b for positive figures (a ratio of a negative slowdown says nothing)."""
    return a / b if a is not None and b is not None and a == a and b == b and a >= 0 and b > 0 else NAN


def met(v, op, bound):
    if v != v or bound is None:
        return "-"
    ok = v <= bound if op == "<=" else v >= bound if op == ">=" else v > bound
    return "met" if ok else "NOT met"


def row(goal, what, getv, ref_text, ref_val, fmt, bound_text, check, spread_of=None):
    """getv(build) -> value; check(value, ratio) -> met text."""
    v = getv("new")
    rt = ratio(v, ref_val)
    meas = f(v, fmt)
    if spread_of:
        lo, hi = spread_of("new")
        if lo == lo and hi == hi and lo != hi:
            meas += " [" + f(lo, fmt) + "-" + f(hi, fmt) + "]"
    r = [goal, what, meas, ref_text, f(rt, "%.2fx") if ref_val is not None else "-", bound_text,
         check(v, rt)]
    if has_base:
        b = getv("base")
        r += [f(b, fmt), f(ratio(v, b), "%.2f")]
    rows.append(r)


# 1. own cost per sample
for cfg, label in (("d30", "idle"), ("d30busy", "busy (2 loops)")):
    if (cfg, "new") not in runs:
        continue
    fc, fs, fw = FL(cfg, "cpu"), FL(cfg, "sysc"), FL(cfg, "csw")
    where = "1 thread depth 30 999 Hz, %s" % label
    row("1", "CPU us/stop, " + where, lambda b: R(cfg, b, "cpu"),
        "floor " + f(fc), fc, "%.1f", "<= 2x floor", lambda v, rt: met(rt, "<=", 2),
        lambda b: RS(cfg, b, "cpu"))
    row("1", "  the same, sampling thread only", lambda b: R(cfg, b, "thread_us"),
        "floor " + f(fc), fc, "%.1f", "<= 2x floor", lambda v, rt: met(rt, "<=", 2),
        lambda b: RS(cfg, b, "thread_us"))
    row("1", "  system calls/stop", lambda b: R(cfg, b, "sysc"),
        "floor " + f(fs), fs, "%.1f", "<= 8", lambda v, rt: met(v, "<=", 8),
        lambda b: RS(cfg, b, "sysc"))
    row("1", "  system calls/weighted sample, sampling thread (-v)", lambda b: R(cfg, b, "thr_sysc_sample"),
        "floor " + f(fs), fs, "%.1f", "<= 8", lambda v, rt: met(v, "<=", 8),
        lambda b: RS(cfg, b, "thr_sysc_sample"))
    row("1", "  context switches/stop", lambda b: R(cfg, b, "csw"),
        "floor " + f(fw, "%.2f"), fw, "%.2f", "-", lambda v, rt: "-",
        lambda b: RS(cfg, b, "csw"))
    row("1", "  target stopped/stop, us", lambda b: R(cfg, b, "stopped"),
        "floor " + f(FL(cfg, "rt")), FL(cfg, "rt"), "%.1f", "-", lambda v, rt: "-",
        lambda b: RS(cfg, b, "stopped"))

# 2. ticks taken
for cfg, label in (("b1", "999 Hz, 1 busy thread"), ("b2", "999 Hz, 2 busy threads"),
                   ("b8", "999 Hz, 8 busy threads"), ("w64", "99 Hz --wall, 64 threads"),
                   ("w256", "99 Hz --wall, 256 threads")):
    if (cfg, "new") not in runs:
        continue
    tk = med(tickers.get(cfg, []))
    row("2", "ticks taken %, " + label, lambda b: R(cfg, b, "taken"),
        "bare timer loop " + f(tk, "%.2f") + " %" if tk == tk else
        "%.0f scheduled" % med([r["ticks"] for r in runs[(cfg, "new")]]),
        tk if tk == tk else None, "%.2f",
        ">= 99.5 %", lambda v, rt: met(v, ">=", 99.5), lambda b: RS(cfg, b, "taken"))
for cfg, label in (("b1", "1 busy"), ("b8", "8 busy"), ("w256", "256 --wall")):
    if (cfg, "new") in runs:
        row("2", "  CPU us/tick taken, " + label, lambda b: R(cfg, b, "cpu_tick"), "-", None,
            "%.1f", "-", lambda v, rt: "-", lambda b: RS(cfg, b, "cpu_tick"))


# 3. heap
def heap_target(tool):
    """heapbench's own time added per pair over unprofiled (us)."""
    return (V("heap.ns." + tool) - V("heap.ns.unprofiled")) / 1000.0 / PAIRS


def heap_net(tool, kind):
    """perf stat of all processes: added per pair over unprofiled, net of
    the 1-pair run (the tool's start-up)."""
    t_n, t_1 = V("heap.%s.%s.%d" % (kind, tool, PAIRS)), V("heap.%s.%s.1" % (kind, tool))
    u_n, u_1 = V("heap.%s.unprofiled.%d" % (kind, PAIRS)), V("heap.%s.unprofiled.1" % kind)
    scale = 1e3 if kind == "cpu" else 1
    return scale * ((t_n - t_1) - (u_n - u_1)) / (PAIRS - 1)


def tool_of(b):
    return "cprof" if b == "new" else b


def small(x):
    return None if x != x or abs(x) < 0.05 else x


if values.get("heap.ns.unprofiled"):
    up = "heap.ns.uprobes" in values
    ref = heap_target("uprobes") if up else NAN
    row("3", "heap, depth 30: target us/pair (its own clock)", lambda b: heap_target(tool_of(b)),
        ("perf uprobes -g " + f(ref)) if up else "uprobes skipped", ref if up else None, "%.1f",
        "<= 2x uprobes", lambda v, rt: met(rt, "<=", 2),
        lambda b: spread([(x - V("heap.ns.unprofiled")) / 1000.0 / PAIRS for x in values.get("heap.ns." + tool_of(b), [])]))
    for kind, what, fmt in (("cpu", "CPU us/pair, tool + target (perf stat)", "%.1f"),
                            ("sysc", "system calls/pair, tool + target", "%.1f"),
                            ("csw", "context switches/pair, tool + target", "%.2f")):
        ref = heap_net("uprobes", kind) if up else NAN
        bound = "<= 2x uprobes" if kind == "cpu" else "-"
        row("3", "  " + what, lambda b, kind=kind: heap_net(tool_of(b), kind),
            ("perf uprobes " + f(ref, fmt)) if up else "uprobes skipped", small(ref) if up else None, fmt, bound,
            (lambda v, rt: met(rt, "<=", 2)) if bound != "-" else (lambda v, rt: "-"))
    if "heap.ns.cproft" in values:
        # --heap-method traps, the same build: one figure, not per build.
        ref = heap_target("uprobes") if up else NAN
        row("3", "  --heap-method traps: target us/pair", lambda b: heap_target("cproft"),
            ("perf uprobes -g " + f(ref)) if up else "uprobes skipped", ref if up else None, "%.1f",
            "-", lambda v, rt: "-")
        ref = heap_net("uprobes", "cpu") if up else NAN
        row("3", "  --heap-method traps: CPU us/pair, tool + target", lambda b: heap_net("cproft", "cpu"),
            ("perf uprobes " + f(ref)) if up else "uprobes skipped", small(ref) if up else None, "%.1f",
            "-", lambda v, rt: "-")
    for ref_tool in ("heaptrack", "ltrace"):
        if "heap.ns." + ref_tool in values:
            ref = heap_target(ref_tool)
            row("3", "  target us/pair vs %s" % ref_tool, lambda b: heap_target(tool_of(b)),
                "%s %s" % (ref_tool, f(ref)), ref, "%.1f", "-", lambda v, rt: "-")
            ref = heap_net(ref_tool, "cpu")
            row("3", "  CPU us/pair vs %s" % ref_tool, lambda b: heap_net(tool_of(b), "cpu"),
                "%s %s" % (ref_tool, f(ref)), ref, "%.1f", "-", lambda v, rt: "-")


def pps(tool, threads):
    return V("hthr.pps.%s.%d" % (tool, threads))


if any(k.startswith("hthr.") for k in values):
    for threads in (1, 2, 4):
        ref = pps("uprobes", threads)
        row("3", "pairs/s, %d allocating thread%s, depth 30" % (threads, "s" if threads > 1 else ""),
            lambda b, t=threads: pps(tool_of(b), t),
            "perf uprobes %s" % f(ref, "%.0f"), ref, "%.0f", "-", lambda v, rt: "-",
            lambda b, t=threads: spread(values.get("hthr.pps.%s.%d" % (tool_of(b), t), [])))
    if "hthr.pps.cproft.1" in values:
        for threads in (1, 2, 4):
            ref = pps("uprobes", threads)
            row("3", "  --heap-method traps: pairs/s, %d thread%s" % (threads, "s" if threads > 1 else ""),
                lambda b, t=threads: pps("cproft", t),
                "perf uprobes %s" % f(ref, "%.0f"), ref, "%.0f", "-", lambda v, rt: "-")
    for threads in (2, 4):
        ref = ratio(pps("uprobes", threads), pps("uprobes", 1))
        unp = ratio(pps("unprofiled", threads), pps("unprofiled", 1))
        row("3", "  growth, %d threads / 1 (unprofiled: %s)" % (threads, f(unp, "%.2f")),
            lambda b, t=threads: ratio(pps(tool_of(b), t), pps(tool_of(b), 1)),
            "perf uprobes %s" % f(ref, "%.2f"), ref, "%.2f", "> 1 (grows)",
            lambda v, rt: met(v, ">", 1.05))


# 4. slowdown
def slow(c):
    """Median over repetitions of the slowdown against the same
    repetition's unprofiled run (pairs cancel the machine's slow drift)."""
    reps = {k.split(".")[1] for k in values if k.startswith("slowrep.")}
    xs = [100.0 * (V("slowrep.%s.%s" % (r, c)) / V("slowrep.%s.unprofiled" % r) - 1) for r in reps]
    return med(xs)


def slow_cpu(c):
    """The same from the target's own CPU time (CLOCK_PROCESS_CPUTIME_ID):
    not moved by the CPU share a loaded machine gives it, nor by the time
    it is stopped."""
    reps = {k.split(".")[1] for k in values if k.startswith("slowcpu.")}
    return med([100.0 * (V("slowcpu.%s.%s" % (r, c)) / V("slowcpu.%s.unprofiled" % r) - 1) for r in reps])


def slow_spread(c):
    reps = {k.split(".")[1] for k in values if k.startswith("slowrep.")}
    return spread([100.0 * (V("slowrep.%s.%s" % (r, c)) / V("slowrep.%s.unprofiled" % r) - 1) for r in reps])


if values.get("slow.unprofiled"):
    lo, hi = spread(values["slow.unprofiled"])
    sp = 100.0 * (hi - lo) / V("slow.unprofiled")
    for hz in ("999", "99"):
        ref = slow("perf" + hz)
        row("4", "slowdown %% at %s Hz, 1 thread, depth 30 (paired)" % hz,
            lambda b, hz=hz: slow(("cprof" if b == "new" else b) + hz),
            "perf -g %s%%" % f(ref, "%+.2f"), ref if ref > 0.05 else None, "%+.2f",
            "<= perf" if hz == "999" else "<= 0.5 %",
            (lambda v, rt, ref=ref: met(v, "<=", max(ref, 0.0))) if hz == "999" else
            (lambda v, rt: met(v, "<=", 0.5)),
            lambda b, hz=hz: slow_spread(("cprof" if b == "new" else b) + hz))
    if any(k.startswith("slowcpu.") for k in values):
        ref = slow_cpu("perf999")
        row("4", "  target's own CPU time, 999 Hz (paired)",
            lambda b: slow_cpu(("cprof" if b == "new" else b) + "999"),
            "perf -g %s%%" % f(ref, "%+.2f"), ref if ref > 0.05 else None, "%+.2f", "-",
            lambda v, rt: "-")
        row("4", "  target's own CPU time, 99 Hz (paired)",
            lambda b: slow_cpu(("cprof" if b == "new" else b) + "99"),
            "perf -g %s%%" % f(slow_cpu("perf99"), "%+.2f"), None, "%+.2f", "-",
            lambda v, rt: "-")
    fast = lambda c: 100.0 * (min(values.get("slow." + c, [NAN])) / min(values["slow.unprofiled"]) - 1)
    ref = fast("perf999")
    row("4", "  elapsed, fastest runs against the fastest unprofiled, 999 Hz",
        lambda b: fast(("cprof" if b == "new" else b) + "999"),
        "perf -g %s%%" % f(ref, "%+.2f"), ref if ref > 0.05 else None, "%+.2f", "<= perf",
        lambda v, rt, ref=ref: met(v, "<=", max(ref, 0.0)))
    rows.append(["4", "  (paired: each run against the unprofiled run of its repetition; the unprofiled runs"])
    rows.append(["4", "   spread %.1f %% of their median: smaller differences are noise)" % sp])

def slowdown_rows(ours, perf):
    """Goal 4's slowdown at 999 and 99 Hz from CPU us per sample: the
    values OURS and PERF (their keys), times the rate."""
    for hz in (999, 99):
        ref = V(perf) * hz / 1e4
        row("4", "  slowdown %% at %d Hz from it" % hz,
            lambda b, hz=hz: V(ours) * hz / 1e4,
            "perf -g %s%%" % f(ref, "%.3f"), ref if ref > 0.0005 else None, "%.3f",
            "<= perf" if hz == 999 else "<= 0.5 %",
            (lambda v, rt, ref=ref: met(v, "<=", max(ref, 0.0))) if hz == 999 else
            (lambda v, rt: met(v, "<=", 0.5)))

if "clockcost.cprof_us_per_sample" in values:
    # bench/clockcost.c: the target's own CPU per sample of each clock,
    # counted at a high rate; the slowdown at a rate is that times the rate.
    ref = V("clockcost.perf_us_per_sample")
    row("4", "target CPU us/sample, its clock (clockcost, %d samples)" % V("clockcost.cprof_samples"),
        lambda b: V("clockcost.cprof_us_per_sample"),
        "perf -g " + f(ref, "%.2f"), ref if ref > 0.005 else None, "%.2f", "-", lambda v, rt: "-")
    if "clockcost.perfdwarf_us_per_sample" in values:
        ref = V("clockcost.perfdwarf_us_per_sample")
        row("4", "  the same against perf --call-graph dwarf (8 KiB copies)",
            lambda b: V("clockcost.cprof_us_per_sample"),
            "perf dwarf " + f(ref, "%.2f"), ref if ref > 0.005 else None, "%.2f", "-", lambda v, rt: "-")
    slowdown_rows("clockcost.cprof_us_per_sample", "clockcost.perf_us_per_sample")

if "clocktools.attach_us_per_sample" in values:
    # The same count with the tools themselves on the thread at 999 Hz:
    # cprof-attach -F 999 against perf record -g -F 999.
    ref = V("clocktools.perfrecord_us_per_sample")
    row("4", "target CPU us/sample, cprof-attach -F 999 itself (clockcost, %d samples)"
        % V("clocktools.attach_samples"),
        lambda b: V("clocktools.attach_us_per_sample"),
        "perf record -g " + f(ref, "%.2f"), ref if ref > 0.005 else None, "%.2f", "-",
        lambda v, rt: "-")
    slowdown_rows("clocktools.attach_us_per_sample", "clocktools.perfrecord_us_per_sample")

# 5. memory
if any(k.startswith("rss_start.") for k in values):
    row("5", "worker VmRSS after 5 s at 99 Hz, MB (rss_start.sh, workload)",
        lambda b: V("rss_start.rssend." + b) / 1024, "-", None, "%.1f", "<= 10 MB",
        lambda v, rt: met(v, "<=", 10))
    row("5", "  its peak (VmHWM), MB", lambda b: V("rss_start.hwmend." + b) / 1024, "-", None,
        "%.1f", "<= 10 MB", lambda v, rt: met(v, "<=", 10))
elif any(k.startswith("churn.hwm2s.") for k in values):
    row("5", "worker VmHWM at 2 s, MB (stackchurn run)", lambda b: V("churn.hwm2s." + b) / 1024,
        "-", None, "%.1f", "<= 10 MB", lambda v, rt: met(v, "<=", 10))
if any(k.startswith("churn.bps.") for k in values):
    row("5", "bytes/distinct stack, stackchurn 999 Hz (VmRSS growth)", lambda b: V("churn.bps." + b),
        "%.0f stacks, from %.1fs" % (V("churn.stacks.new"), V("churn.tfrom.new")), None, "%.0f", "<= 64", lambda v, rt: met(v, "<=", 64),
        lambda b: spread(values.get("churn.bps." + b, [])))
for shape in sorted({k.split(".")[1] for k in values if k.startswith("stackmem.")}):
    row("5", "bytes/distinct stack, stackmem %s depth 20 (malloc)" % shape,
        lambda b, shape=shape: V("stackmem.%s.%s" % (shape, b)),
        "-", None, "%.0f", "<= 64", lambda v, rt: met(v, "<=", 64))

if not rows:
    print("nothing measured")
    sys.exit(1)
hdr = ["goal", "figure", "measured [min-max]", "reference, same run", "ratio", "bound", "met"]
if has_base:
    hdr += ["base", "new/base"]
widths = [4, 56, 24, 22, 7, 13, 7, 9, 8]
def line(cells):
    if len(cells) == 2:
        return "%-4s %s" % tuple(cells)
    return " ".join(("%-" + str(w) + "s" if i < 2 or i == 3 else "%" + str(w) + "s") % c
                    for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
print(line(hdr))
for r in rows:
    print(line(r))
for b in sorted(no_stop_count):
    print("(%s: its cprof-attach -v does not count stops; its figures \"per sample\" are per sample taken)" % b)
loads = values.get("load.start", []) + values.get("heap.load", []) + values.get("slow.load", []) + \
    values.get("load.end", []) + [r["load"] for rs in runs.values() for r in rs]
lo, hi = spread(loads)
print("load average (1 min) during the runs: median %s, %s-%s on %d CPUs" % (
    f(med(loads)), f(lo), f(hi), os.cpu_count() or 0))
