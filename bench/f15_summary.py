#!/usr/bin/env python3
"""Medians of bench/f15.sh's runs: per configuration and build, per sample."""
import glob, os, re, statistics, sys
from collections import defaultdict

out = sys.argv[1]
groups = defaultdict(list)
for err in glob.glob(out + "/runs/*.err"):
    tag = err[:-4]
    cfg, build, rep = os.path.basename(tag).split(".")
    text = open(err).read()
    r = {}
    m = re.search(r"(\d+) samples from .*?(\d+) of (\d+) ticks missed", text)
    if not m:
        m2 = re.search(r"(\d+) samples from", text)
        if not m2:
            continue
        r["samples"], r["missed"], r["ticks"] = float(m2.group(1)), 0.0, None
    else:
        r["samples"], r["missed"], r["ticks"] = float(m.group(1)), float(m.group(2)), float(m.group(3))
    m = re.search(r"stopped per sample: median ([0-9.]+) us", text)
    r["stopped"] = float(m.group(1)) if m else float("nan")
    m = re.search(r"stop latency .*?: median ([0-9.]+) us", text)
    r["latency"] = float(m.group(1)) if m else float("nan")
    m = re.search(r"(\d+) ticks found a thread runnable but not run", text)
    r["waiting"] = float(m.group(1)) if m else 0.0
    m = re.search(r"(\d+) stops; our CPU", text)
    r["stops"] = float(m.group(1)) if m else r["samples"]
    m = re.search(r"\(([0-9.]+) us on the sampling thread\)", text)
    r["thread_us"] = float(m.group(1)) if m else float("nan")
    ev = {}
    for line in open(tag + ".stat"):
        f = line.strip().split(",")
        if len(f) > 3 and f[0] and f[0][0].isdigit():
            ev[f[2]] = float(f[0])
    r["ev"] = ev
    r["load"] = float(open(tag + ".load").read())
    groups[(cfg, build)].append(r)

floors = defaultdict(list)
for line in open(out + "/floor.tsv"):
    cfg, rep, text = line.rstrip("\n").split("\t")
    m = re.search(r"round_trip_us median ([0-9.]+).*cpu_us_per_round_trip ([0-9.]+) csw_per_round_trip ([0-9.]+)", text)
    if m:
        floors[cfg].append(tuple(float(x) for x in m.groups()))

def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")

kinds = sorted({k.split("sys_enter_")[1] for rs in groups.values() for r in rs
                for k in r["ev"] if "sys_enter_" in k})
order = ["wait4", "ppoll", "ptrace", "read", "pread64", "rt_sigprocmask",
         "process_vm_readv", "rt_sigtimedwait", "openat", "close", "futex",
         "clock_nanosleep", "write"]
kinds = [k for k in order if k in kinds] + [k for k in kinds if k not in order]
print("per stop (cpu_us, csw, sysc, kinds) and per tick taken, medians of reps (ticks taken% = 1 - missed/scheduled)")
hdr = ["cfg", "build", "n", "stops", "taken%", "stop_us", "lat_us", "cpu_us", "thr_us", "cpu_us/tick", "sysc/tick", "csw", "sysc"] + kinds + ["other", "load"]
print("\t".join(hdr))
cfgs = []
for (cfg, build) in groups:
    if cfg not in cfgs:
        cfgs.append(cfg)
for (cfg, build), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
    def per(ev):
        return med([r["ev"].get(ev, 0) / max(1, r["stops"]) for r in rs])
    taken = med([100.0 * (1 - r["missed"] / r["ticks"]) if r["ticks"] else float("nan") for r in rs])
    vals = [cfg, build, str(len(rs)), "%.0f" % med([r["stops"] for r in rs]), "%.1f" % taken,
            "%.1f" % med([r["stopped"] for r in rs]),
            "%.1f" % med([r["latency"] for r in rs]),
            "%.1f" % med([r["ev"].get("task-clock", 0) * 1000 / max(1, r["stops"]) for r in rs]),
            "%.1f" % med([r["thread_us"] for r in rs]),
            "%.1f" % med([r["ev"].get("task-clock", 0) * 1000 / max(1, r["ticks"] - r["missed"]) if r["ticks"] else float("nan") for r in rs]),
            "%.1f" % med([r["ev"].get("raw_syscalls:sys_enter", 0) / max(1, r["ticks"] - r["missed"]) if r["ticks"] else float("nan") for r in rs]),
            "%.2f" % per("context-switches"), "%.1f" % per("raw_syscalls:sys_enter")]
    vals += ["%.2f" % per("syscalls:sys_enter_" + k) for k in kinds]
    vals.append("%.2f" % med([(r["ev"].get("raw_syscalls:sys_enter", 0) - sum(
        r["ev"].get("syscalls:sys_enter_" + k, 0) for k in kinds)) / max(1, r["stops"]) for r in rs]))
    vals.append("%.1f" % med([r["load"] for r in rs]))
    print("\t".join(vals))
print()
print("cfg\tfloor_round_trip_us\tfloor_cpu_us\tfloor_csw (per round trip, getregs included)")
for cfg, fl in sorted(floors.items()):
    print("%s\t%.1f\t%.1f\t%.2f" % (cfg, med([a for a, b, c in fl]), med([b for a, b, c in fl]), med([c for a, b, c in fl])))
