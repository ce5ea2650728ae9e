#!/usr/bin/env python3
"""How fast `runlens send` itself pushes a recording, into a PULL that only counts.

Synthesizes the overload benchmark's recording of issue 12 (cached in --dir):

  runlens synth --ranks 1024 --steps 500 --gpu-every 1 --fault straggler:rank=713,from=250 --fault nan:step=480

then runs `runlens send FILE --to tcp://127.0.0.1:PORT` as a burst and at the
given --rates, each --repeat times (alternating run by run), into a ZeroMQ PULL
in this process that counts frames and bytes and nothing else. Prints, per
mode, the median achieved events/s and time blocked on the socket from send's
`--json` line, and checks that every frame arrived:

  /usr/bin/python3 bench/send_throughput.py --repeat 3 --rates 1M 2M
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading

import zmq

from overload_recording import add_arguments, recording


class Counter:
    """A PULL on a loopback port chosen now that counts what arrives."""

    def __init__(self):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.PULL)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.frames = 0
        self.bytes = 0
        self.stop = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        while not self.stop:
            if not poller.poll(100):
                continue
            while True:
                try:
                    m = self.sock.recv(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                self.frames += 1
                self.bytes += len(m)

    def wait_for(self, frames, timeout=60):
        import time
        end = time.time() + timeout
        while self.frames < frames and time.time() < end:
            time.sleep(0.01)
        return self.frames


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    args = ap.parse_args()
    rec = recording(args)
    modes = ["burst"] + args.rates
    results = {m: [] for m in modes}
    for _ in range(args.repeat):
        for mode in modes:
            counter = Counter()
            cmd = [args.binary, "send", rec, "--to", "tcp://127.0.0.1:%d" % counter.port, "--json"]
            cmd += ["--burst"] if mode == "burst" else ["--rate", mode]
            out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
            line = json.loads(out.stdout.strip().splitlines()[-1])
            got = counter.wait_for(line["frames"])
            counter.stop = True
            counter.thread.join()
            if got != line["frames"]:
                sys.exit("%s: sent %d frames, %d arrived" % (mode, line["frames"], got))
            results[mode].append(line)
    size = os.path.getsize(rec)
    first = results["burst"][0]
    print("recording: %s, %d events in %d frames, %.0f MiB" % (rec, first["events"], first["frames"], size / 2**20))
    print("| mode | events/s (median of %d) | elapsed | blocked on the socket |" % args.repeat)
    print("|---|---|---|---|")
    for mode in modes:
        rs = results[mode]
        print("| %s | %.2f M | %.2f s | %.2f s |" % (
            "burst" if mode == "burst" else "--rate " + mode,
            statistics.median(r["events_per_s"] for r in rs) / 1e6,
            statistics.median(r["elapsed_s"] for r in rs),
            statistics.median(r["blocked_s"] for r in rs)))


if __name__ == "__main__":
    main()
