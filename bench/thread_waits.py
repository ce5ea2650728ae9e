#!/usr/bin/python3
"""What each thread of a replay waits on: running, asleep (by where), or waiting for a core.

Each round replays FILE (`runlens replay FILE --out DIR --quiet`) while
`perf record -a -e sched:sched_switch --call-graph dwarf` (Debian's
linux-perf) records every context switch of the machine, with the stack of
the thread that leaves the core. For each thread of the replay it adds up:

  run       time on a core
  runnable  time ready to run but without a core (preempted, or woken and
            not yet on a core: the cores were busy)
  asleep    time blocked, by the call site it blocked in (the innermost
            runlens functions of its stack): waiting for rows, for a queue
            with room, for another thread, for the disk

Threads are named by the runlens function their stacks start in (main: the
thread that called `run()`, which works in the executor's arena at --threads
1). Figures are medians over the rounds, in ms per replay.

    bench/thread_waits.py --file rich.jsonl --repeat 3
    bench/thread_waits.py --file g.rlrec --runlens build/runlens --min-ms 5

A replay whose threads are asleep while their cores sit idle is limited by a
hand-over between them, not by the CPU; one whose threads wait as runnable
is short of cores. docs/performance.md quotes figures made with it.

perf does not always unwind a sleeping thread's stack past libc's futex
wait (in some recordings none of them, on this machine); its sleeps are
then listed as "(no runlens frame unwound)". The totals do not depend on
the stacks.
"""
import argparse
import collections
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVENT = re.compile(r"(\d+)/\d+\s+(\d+\.\d+): sched:sched_switch: prev_comm=.* prev_pid=(\d+) prev_prio=\d+ "
                   r"prev_state=(\S+) ==> next_comm=.* next_pid=(\d+) next_prio=\d+")


def short(frame):
    """A frame's function without arguments, templates or namespaces but the class."""
    f = frame.rsplit(" (", 1)[0]
    f = re.sub(r"\+0x[0-9a-f]+$", "", f)
    depth, out = 0, []
    for ch in f:  # drop template arguments and parameter lists
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    parts = [p for p in "".join(out).split("::")
             if p and not p.startswith("{lambda") and "anonymous namespace" not in p]
    if parts and parts[0] == "runlens":
        parts = parts[1:]
    keep = 3 if len(parts) >= 3 and parts[-2] in ("State", "Impl") else 2  # a nested class says little alone
    return "::".join(parts[-keep:]) if parts else f


def parse(script):
    """[(process of prev, time, prev tid, prev state, next tid, [frames of prev, innermost first])]."""
    events, current = [], None
    for line in script.splitlines():
        if not line.strip():
            current = None
            continue
        if not line.startswith("\t"):  # an event (its frames follow, each indented by a tab)
            m = EVENT.search(line)
            current = None
            if m:
                current = [int(m.group(1)), float(m.group(2)), int(m.group(3)), m.group(4), int(m.group(5)), []]
                events.append(current)
            continue
        if current is not None:
            fields = line.strip().split(None, 1)
            if len(fields) == 2 and "kernel.kallsyms" not in fields[1]:
                current[5].append(fields[1])
    return events


def profile(runlens, path, workdir):
    out = os.path.join(workdir, "out")
    data = os.path.join(workdir, "perf.data")
    shutil.rmtree(out, ignore_errors=True)
    # The replay is started by a shell that first prints its own pid, so the
    # replay's threads can be told from the rest of the machine's.
    cmd = ["perf", "record", "-q", "-a", "-e", "sched:sched_switch", "--call-graph", "dwarf,16384", "-o", data, "--",
           "sh", "-c", 'echo $$; exec "$0" replay "$1" --out "$2" --quiet', runlens, path, out]
    rec = subprocess.run(cmd, capture_output=True, text=True)
    if rec.returncode != 0:
        sys.exit("perf record failed (%d):\n%s" % (rec.returncode, rec.stderr[-2000:]))
    pid = int(rec.stdout.split()[0])
    fields = "pid,tid,time,event,trace,ip,sym,dso"
    script = subprocess.run(["perf", "script", "-i", data, "-F", fields], capture_output=True, text=True,
                            check=True).stdout
    return account(parse(script), pid)


def account(events, pid):
    """{thread name: {"run": ms, "runnable": ms, "asleep": {site: ms}}} for the threads of process `pid`."""
    # The replay's threads: its main thread, and each of its threads whose
    # stacks show runlens code (ZeroMQ's own threads do not).
    on_core, off = {}, {}  # tid -> time switched in; tid -> (time switched out, state, site)
    run = collections.Counter()
    runnable = collections.Counter()
    asleep = collections.defaultdict(collections.Counter)
    entry = {}  # tid -> the outermost runlens function seen on its stacks
    for process, t, prev, state, nxt, frames in events:
        names = [short(f) for f in frames if f.startswith("runlens::")]
        if process == pid and names and prev not in entry:
            entry[prev] = names[-1]
        if prev in on_core:
            run[prev] += t - on_core.pop(prev)
        if state.startswith("R"):
            off[prev] = (t, "runnable", None)
        else:
            off[prev] = (t, "asleep", " < ".join(dict.fromkeys(names[:2])) or "(no runlens frame unwound)")
        if nxt in off:
            t0, how, site = off.pop(nxt)
            if how == "runnable":
                runnable[nxt] += t - t0
            else:
                asleep[nxt][site] += t - t0
        on_core[nxt] = t
    threads = {}
    taken = collections.Counter()
    for tid in set(run) | set(asleep):
        if (tid not in entry and tid != pid) or run[tid] < 1e-3:
            continue  # not the replay's, or a thread that waited all along (a joiner)
        name = "main" if tid == pid else entry[tid]
        taken[name] += 1
        if taken[name] > 1:
            name = "%s #%d" % (name, taken[name])
        threads[name] = {"run": run[tid] * 1e3, "runnable": runnable[tid] * 1e3,
                         "asleep": {s: v * 1e3 for s, v in asleep[tid].items()}}
    return threads


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", required=True, help="a JSONL file or recording to replay")
    ap.add_argument("--runlens", default=os.path.join(REPO, "build", "runlens"))
    ap.add_argument("--repeat", type=int, default=3, help="rounds (medians of them)")
    ap.add_argument("--min-ms", type=float, default=2.0, help="the sleep sites listed")
    args = ap.parse_args()
    if shutil.which("perf") is None:
        sys.exit("perf is not installed (apt-get install linux-perf)")
    rounds = []
    with tempfile.TemporaryDirectory(prefix="thread-waits-") as workdir:
        for _ in range(args.repeat):
            rounds.append(profile(args.runlens, args.file, workdir))

    def med(values):
        values = list(values)
        return statistics.median(values + [0.0] * (len(rounds) - len(values)))  # a round without it: 0

    names = sorted({n for r in rounds for n in r},
                   key=lambda n: (n != "main", -med(r[n]["run"] for r in rounds if n in r)))
    print("medians of %d rounds, ms per replay of %s" % (len(rounds), args.file))
    for name in names:
        mine = [r[name] for r in rounds if name in r]
        total_asleep = med(sum(t["asleep"].values()) for t in mine)
        print("%-40s run %7.1f  runnable %6.1f  asleep %7.1f" %
              (name[:40], med(t["run"] for t in mine), med(t["runnable"] for t in mine), total_asleep))
        sites = {s for t in mine for s in t["asleep"]}
        rows = sorted(((med(t["asleep"].get(s, 0.0) for t in mine), s) for s in sites), reverse=True)
        for ms, site in rows:
            if ms < args.min_ms:
                break
            print("    asleep %7.1f  in %s" % (ms, site[:110]))


if __name__ == "__main__":
    main()
