#!/usr/bin/env python3
"""What one Python step scope costs (docs/performance-sdk.md): a step with the
four standard phases and s.train(...), against the same loop body without
the SDK, with no collector listening. Prints medians of 21 runs of 2000 steps.

    PYTHONPATH=build/python /usr/bin/python3 bench/sdk_python_step_bench.py
"""

import socket
import statistics
import time

import runlens


def dead_endpoint():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def main():
    em = runlens.Emitter(dead_endpoint(), run_id="bench", rank=1, world_size=2)

    def with_sdk(i):
        with em.step(i) as s:
            with s.phase("data"):
                pass
            with s.phase("forward"):
                pass
            with s.phase("backward"):
                pass
            with s.phase("optimizer"):
                pass
            s.train(loss=2.0, lr=1e-3, grad_norm=0.5, tokens=4096)

    def without_sdk(i):
        pass

    for body in (with_sdk, without_sdk):
        runs = []
        for _ in range(21):
            t0 = time.perf_counter_ns()
            for i in range(2000):
                body(i)
            runs.append((time.perf_counter_ns() - t0) / 2000)
        print(f"{body.__name__:12s} median {statistics.median(runs) / 1000:.2f} us per step")
    stats = em.stats()
    emitted, dropped = sum(stats["emitted"].values()), sum(stats["dropped"].values())
    print(f"emitted {emitted}, dropped {dropped} (nobody listens)")
    em.close(timeout=0)


if __name__ == "__main__":
    main()
