#!/usr/bin/env python3
"""How long a process takes to close many emitters, alone and with others (docs/sdk.md, "Threads").

A launcher that reports for several ranks, or bench/alert_latency.py's worker
processes (128 ranks each), closes its emitters one after another when the
job ends; each rank's final batch (which retires its producer and carries
its last promise) goes at its close, so the job's last alerts wait for the
last close of the slowest process. This starts --procs processes of
--emitters emitters each (runlens.Emitter, into a ZeroMQ PULL in this process
that only counts), has each emit one step per emitter, then close them all
at the same wall-clock moment, and prints per run the slowest process's
times: when its last close began and when its closes were done (the last
close also ends the process's ZeroMQ context, which waits for the queued
batches). Medians over --repeat runs:

  PYTHONPATH=build/python /usr/bin/python3 bench/sdk_close.py --procs 1 8 --repeat 5
"""
import argparse
import json
import statistics
import subprocess
import sys
import threading
import time

import zmq


def worker(args):
    import runlens

    ems = [runlens.Emitter(args.endpoint, run_id="sdk-close", rank=r + 1, world_size=args.emitters + 1,
                           flush_interval_ms=50, close_timeout=5.0) for r in range(args.emitters)]
    time.sleep(max(0.0, args.go - time.time()))
    for em in ems:
        em.emit("step", step=0, step_ms=1.0)
    start = time.perf_counter()
    last_began = 0.0
    for i, em in enumerate(ems):
        if i == len(ems) - 1:
            last_began = time.perf_counter() - start
        em.close()
    print(json.dumps({"last_began_ms": last_began * 1e3, "done_ms": (time.perf_counter() - start) * 1e3}))


def one_run(args, procs):
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    stop = threading.Event()

    def drain():
        while not stop.is_set():
            if pull.poll(50):
                pull.recv()

    t = threading.Thread(target=drain)
    t.start()
    go = time.time() + 2.0 + 0.002 * procs * args.emitters  # every emitter made and connected first
    cmd = [sys.executable, __file__, "--worker", "--endpoint", f"tcp://127.0.0.1:{port}", "--go", repr(go),
           "--emitters", str(args.emitters)]
    ps = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(procs)]
    rows = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in ps]
    stop.set()
    t.join()
    pull.close(linger=0)
    ctx.term()
    return max(r["last_began_ms"] for r in rows), max(r["done_ms"] for r in rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", type=int, nargs="*", default=[1, 8])
    ap.add_argument("--emitters", type=int, default=128, help="emitters per process")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--endpoint")
    ap.add_argument("--go", type=float)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    for procs in args.procs:
        runs = [one_run(args, procs) for _ in range(args.repeat)]
        began = statistics.median(r[0] for r in runs)
        done = statistics.median(r[1] for r in runs)
        print(f"{procs} process(es) x {args.emitters} emitters, {args.repeat} runs: the slowest process's last close "
              f"began after {began:.1f} ms, its closes done after {done:.1f} ms (medians; runs: "
              f"{', '.join(f'{r[0]:.1f}/{r[1]:.1f}' for r in runs)})", flush=True)


if __name__ == "__main__":
    main()
