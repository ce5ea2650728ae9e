#!/usr/bin/env python3
"""What rate a live `runlens run` sustains, not only what `runlens send` pushed (issue 13).

The recording is issue 12's overload recording (bench/overload_recording.py:
1024 ranks x 500 steps, GPU samples every step, 1.09 M events; --steps makes
it longer, 2,180 events a step, so that what a run's end costs once, the last
batches' way through the pipeline, weighs less in the rate) and one event
more: a node sample of a node of no run ("live-bench-marker"), 10 s after the
run's run_end (synth writes JSONL, the line is appended, `runlens convert`
makes the recording; cached in --dir). Live, a row is released when the
source's watermark (its largest event time less `lateness`, 5 s) passes it,
so without the marker the last 5 s of the run (its run_end) would wait for the
idle timeout (30 s). For each
--threads and each mode (--rates, then a burst), alternating, --repeat times:
`runlens run --threads T` (the default pipeline, loopback ports chosen now,
--counters-json) and a ZeroMQ subscriber on its alert stream, then
`runlens send REC --rate R` (or --burst). Measured:

  * pushed: send's own rate (its --json line: events over the time from its
    first frame to its queue flushed);
  * processed: events over the time from send's first frame (send's exit less
    its elapsed_s) to the arrival at the subscriber of the alert the last
    event raises: the straggler's resolution, which the straggler detector
    emits when it reads the run's run_end, the recording's last event, and
    the zmq_pub sink publishes after asof_join (the detector's chain);
  * lag: that last alert's arrival less send's exit (how far the pipeline
    finished behind the pusher);
  * shed rows by priority, rows the source read and late rows (every node of
    --counters-json), and the zmq_pub sink's latency (arrival of the batch
    whose watermark released an alert to its publication) p50 / p99 / max;
  * the collector's peak RSS (wait4's ru_maxrss).

  /usr/bin/python3 bench/live_throughput.py --threads 1 2 --rates 1M 2M --repeat 3
  /usr/bin/python3 bench/live_throughput.py --threads 1 2 --rates 2M --steps 4000 --repeat 3
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from overload_recording import SYNTH_FLAGS, add_arguments, free_port
from procs import Subscriber


def recording(args):
    """The overload recording plus the marker event, made once in --dir."""
    os.makedirs(args.dir, exist_ok=True)
    path = os.path.join(args.dir, "live-1024x%d-marker.rlrec" % args.steps)
    if os.path.exists(path):
        return path
    jsonl = path + ".jsonl"
    flags = list(SYNTH_FLAGS)
    flags[flags.index("--steps") + 1] = str(args.steps)
    subprocess.run([args.binary, "synth", *flags, "--out", jsonl], check=True, stderr=subprocess.DEVNULL)
    last = 0
    with open(jsonl) as f:
        for line in f:
            last = max(last, json.loads(line)["time_ns"])
    with open(jsonl, "a") as f:
        f.write(json.dumps({"type": "node", "time_ns": last + 10_000_000_000, "node": "live-bench-marker",
                            "cpu_pct": 1.0}) + "\n")
    subprocess.run([args.binary, "convert", jsonl, path + ".part.rlrec"], check=True, stderr=subprocess.DEVNULL)
    os.rename(path + ".part.rlrec", path)
    os.remove(jsonl)
    return path


def last_event_alert(alerts):
    """Arrival of the straggler's resolution (the revision with ends_ns, raised by the run's run_end), or None."""
    for at_ns, a in alerts:
        if a.get("kind") == "straggler" and a.get("ends_ns"):
            return at_ns / 1e9
    return None


def wait_rss(proc, timeout):
    """Waits for `proc` (killed after `timeout` s) and returns its peak RSS in MiB (wait4's ru_maxrss)."""
    end = time.time() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = status
            return usage.ru_maxrss / 1024.0
        if time.time() > end:
            proc.kill()
            end = float("inf")
        time.sleep(0.05)


def live_run(args, rec, threads, mode, tmp):
    listen, publish = free_port(), free_port()
    out = tempfile.mkdtemp(dir=tmp)
    counters = os.path.join(out, "counters.json")
    log = open(os.path.join(out, "run.log"), "w")
    collector = subprocess.Popen(
        [args.binary, "run", "--out", out, "--quiet", "--counters-json", counters, "--threads", str(threads),
         "--set", f"RUNLENS_LISTEN=tcp://127.0.0.1:{listen}", "--set", f"RUNLENS_PUBLISH=tcp://127.0.0.1:{publish}"],
        stdout=subprocess.DEVNULL, stderr=log)
    sub = Subscriber(f"tcp://127.0.0.1:{publish}")
    try:
        time.sleep(1.0)  # the collector binds, the subscriber joins
        cmd = [args.binary, "send", rec, "--to", f"tcp://127.0.0.1:{listen}", "--json", "--hwm", str(args.hwm)]
        cmd += ["--burst"] if mode == "burst" else ["--rate", mode]
        sent = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
        send_end = time.time()
        line = json.loads(sent.stdout.strip().splitlines()[-1])
        end = time.time() + args.wait
        while last_event_alert(sub.alerts) is None and time.time() < end:
            time.sleep(0.01)
        time.sleep(0.5)
    finally:
        collector.send_signal(signal.SIGINT)
        rss = wait_rss(collector, 120)
        log.close()
        sub.close()
    first_frame = send_end - line["elapsed_s"]
    done = last_event_alert(sub.alerts)
    r = {"send": line, "dropped": [0, 0, 0, 0], "source_in": 0, "late": 0, "latency": None, "rss": rss,
         "processed": None, "lag": None, "alerts": len(sub.alerts)}
    if done is not None:
        r["processed"] = line["events"] / (done - first_frame)
        r["lag"] = done - send_end
    with open(counters) as f:
        for node in map(json.loads, f):
            for p in range(4):
                r["dropped"][p] += node["dropped"][f"P{p}"]
            r["late"] += node["late"]
            if node["type"] == "zmq":
                r["source_in"] = node["in"]
            if node["type"] == "zmq_pub" and "latency_us" in node:
                r["latency"] = node["latency_us"]
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="`runlens run --threads`")
    ap.add_argument("--hwm", type=int, default=1000, help="`runlens send --hwm` (frames queued on the sending side)")
    ap.add_argument("--wait", type=float, default=60.0, help="seconds to wait for the last event's alert")
    ap.add_argument("--steps", type=int, default=500,
                    help="steps of the recording (at least 500: its faults are at steps 250 and 480)")
    args = ap.parse_args()
    if args.steps < 500:
        ap.error("--steps: at least 500")
    rec = recording(args)
    modes = args.rates + ["burst"]
    configs = [(t, m) for t in args.threads for m in modes]
    results = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="runlens-live-") as tmp:
        for _ in range(args.repeat):
            for t, mode in configs:
                r = live_run(args, rec, t, mode, tmp)
                results[(t, mode)].append(r)
                print("  threads %d %s: pushed %.2f M/s, processed %s, lag %s, shed P0-P3 %s, read %d of %d, late %d"
                      % (t, mode, r["send"]["events_per_s"] / 1e6,
                         "%.2f M/s" % (r["processed"] / 1e6) if r["processed"] else "(no last alert)",
                         "%.2f s" % r["lag"] if r["lag"] is not None else "-", r["dropped"], r["source_in"],
                         r["send"]["events"], r["late"]), flush=True)
    print("| threads | mode | pushed (median of %d) | processed | finished after send | shed P0 / P1 / P2 / P3 "
          "| alert latency p50 / p99 / max | peak RSS |" % args.repeat)
    print("|---|---|---|---|---|---|---|---|")
    bad = False
    for t, mode in configs:
        rs = results[(t, mode)]
        med = lambda f: statistics.median(f(r) for r in rs)
        done = [r for r in rs if r["processed"]]
        drops = " / ".join("%d" % med(lambda r, p=p: r["dropped"][p]) for p in range(4))
        lat = [r["latency"] for r in rs if r["latency"]]
        print("| %d | %s | %.2f M events/s | %s | %s | %s | %s | %.0f MiB |" % (
            t, "burst" if mode == "burst" else "--rate " + mode, med(lambda r: r["send"]["events_per_s"]) / 1e6,
            "%.2f M events/s" % (statistics.median(r["processed"] for r in done) / 1e6) if done else "-",
            "%.2f s" % statistics.median(r["lag"] for r in done) if done else "-", drops,
            "%.0f / %.0f / %.0f ms" % (statistics.median(l["p50"] for l in lat) / 1e3,
                                       statistics.median(l["p99"] for l in lat) / 1e3,
                                       max(l["max"] for l in lat) / 1e3) if lat else "-",
            med(lambda r: r["rss"])))
        bad |= any(r["dropped"][0] or not r["processed"] for r in rs)
    if bad:
        print("FAILED: a live run lost P0 rows or never raised the last event's alert")
        sys.exit(1)


if __name__ == "__main__":
    main()
