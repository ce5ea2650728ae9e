"""runlens.eval.code: the sandboxed runner (limits, isolation, the reason a
program failed), the benchmark, and the mutation sampler whose pass@k lies
strictly between 0 and 1."""

import os

import pytest

from runlens.eval import code
from runlens.eval import metrics as X

TEST = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(5) == 10\n"
FAST = code.Limits(timeout_s=1.5, cpu_s=1)


def run(programs, limits=FAST):
    results = code.run_many([{"program": p, "test": TEST, "entry_point": "f"} for p in programs], limits)
    return results


def test_each_outcome_has_its_status_and_reason():
    programs = [
        "def f(x):\n    return x * 2\n",
        "def f(x):\n    return x + 2\n",
        "def f(x):\n    return 1 / 0\n",
        "def f(x)\n    return x\n",
        "x = 1\n",
        "import os\ndef f(x):\n    os._exit(0)\n",
        "def f(x):\n    assert x > 3, 'too small'\n    return 2 * x\n",
    ]
    r = run(programs)
    assert [x.status for x in r] == ["passed", "wrong_answer", "exception", "exception", "exception", "exception", "exception"]
    assert r[0].passed and not r[1].passed
    assert r[1].reason == "tests.py:3: assert candidate(5) == 10"
    assert r[2].reason.startswith("ZeroDivisionError") and "candidate.py:2" in r[2].reason
    assert r[3].reason.startswith("SyntaxError")
    assert "does not define f" in r[4].reason
    assert "before the tests finished" in r[5].reason  # exiting early is not passing
    assert "AssertionError in the program" in r[6].reason
    assert all(x.wall_ms > 0 and x.cpu_ms > 0 and x.max_rss_kb > 0 for x in r)


def test_time_limits_kill_busy_and_sleeping_programs():
    r = run(["def f(x):\n    while True:\n        pass\n", "import time\ndef f(x):\n    time.sleep(60)\n"])
    assert [x.status for x in r] == ["timeout", "timeout"]
    for x in r:
        assert x.wall_ms < 10_000 and ("CPU time limit" in x.reason or "wall time limit" in x.reason)
    assert "wall time limit (1.5 s)" == r[1].reason
    # a CPU-bound loop hits RLIMIT_CPU when the wall limit is long
    (x,) = run(["def f(x):\n    while True:\n        pass\n"], code.Limits(timeout_s=20, cpu_s=1))
    assert x.status == "timeout" and x.reason == "CPU time limit (1 s)" and x.cpu_ms >= 900


def test_memory_and_output_limits():
    r = run(
        [
            "def f(x):\n    return len(bytearray(10 ** 10))\n",
            "def f(x):\n    a = []\n    while True:\n        a.append(' ' * 10 ** 6)\n",
            "def f(x):\n    while True:\n        print('x' * 1000)\n",
            "def f(x):\n    open('big', 'wb').write(b'x' * (4 << 20))\n    return 2 * x\n",
        ],
        code.Limits(timeout_s=10, cpu_s=5, memory_mb=128),
    )
    assert [x.status for x in r] == ["memory", "memory", "output_limit", "output_limit"]
    assert r[1].max_rss_kb < 140 * 1024


def test_the_program_cannot_run_commands_fork_or_touch_files(tmp_path):
    marker = tmp_path / "pwned"
    os.chmod(tmp_path, 0o777)  # even a writable directory stays untouched
    programs = [
        f"import os\ndef f(x):\n    os.system('touch {marker}')\n    return 2 * x\n",
        f"import posix\ndef f(x):\n    posix.system('touch {marker}')\n    return 2 * x\n",
        "import subprocess\ndef f(x):\n    return 2 * x\n",
        f"import os\ndef f(x):\n    os.unlink('{tmp_path}')\n",
        "import os\ndef f(x):\n    return 2 * x if os.getcwd().startswith('/tmp/runlens-sandbox-') else 0\n",
    ]
    r = run(programs)
    assert [x.status for x in r[:4]] == ["exception"] * 4
    assert "NoneType" in r[0].reason and "NoneType" in r[1].reason
    assert "import of subprocess halted" in r[2].reason
    assert r[4].status == "passed"  # the working directory is a fresh temporary one
    assert not marker.exists()
    if os.geteuid() == 0:
        x, y = run(["import os\ndef f(x):\n    return 2 * x if os.getuid() != 0 else 0\n",
                    "def f(x):\n    return len(open('job').read())\n"])
        assert x.passed  # root's children run as an unprivileged user
        assert y.status == "exception" and "Permission denied: 'job'" in y.reason  # the job (its nonce) is the parent's


@pytest.mark.skipif(
    code._IDENTITY == ("nobody",), reason="the user namespace maps no private uid: RLIMIT_NPROC is not enforced as root"
)
def test_past_the_in_process_guard_the_kernel_still_refuses_new_processes(tmp_path):
    marker = tmp_path / "pwned"
    os.chmod(tmp_path, 0o777)
    program = (
        "import sys\nfor m in ('ctypes', '_ctypes', 'threading'):\n    sys.modules.pop(m, None)\nimport ctypes\n"
        "def f(x):\n    libc = ctypes.CDLL(None)\n    pid = libc.fork()\n    if pid == 0:\n        libc._exit(0)\n"
        f"    assert pid == -1, 'forked'\n    assert libc.system(b'touch {marker}') != 0\n    return 2 * x\n"
    )
    (r,) = run([program])
    assert r.status == "passed", r.reason
    assert not marker.exists()


def test_the_benchmark_is_correct_and_hashed():
    ps = code.problems()
    assert 15 <= len(ps) <= 30 and len({p.id for p in ps}) == len(ps)
    r = code.run_many([{"program": p.prompt + p.solution, "test": p.test, "entry_point": p.entry_point} for p in ps])
    assert [x.status for x in r] == ["passed"] * len(ps), [(p.id, x.reason) for p, x in zip(ps, r) if not x.passed]
    bench = code.benchmark()
    assert bench.id == "pyfuncs:1" and len(bench) == len(ps) and bench.items[0].id == ps[0].id
    assert bench.hash == code.benchmark().hash
    for p in ps:
        assert '"""' in p.prompt and p.prompt.rstrip().endswith('"""') and "def check(candidate)" in p.test


def test_sampler_is_deterministic_per_seed():
    ps = code.problems()
    a = [code.MutationSampler(seed=3).sample(p, i).program for p in ps for i in range(4)]
    b = [code.MutationSampler(seed=3).sample(p, i).program for p in ps for i in range(4)]
    c = [code.MutationSampler(seed=4).sample(p, i).program for p in ps for i in range(4)]
    assert a == b and a != c
    s = code.MutationSampler(seed=0, p_mutate=1.0).sample(ps[6], 0)
    assert s.mutations and s.program != ps[6].prompt + ps[6].solution and s.program.startswith(ps[6].prompt)
    compile(s.program, "x", "exec")
    ref = code.MutationSampler(seed=0, p_mutate=0.0).sample(ps[6], 0)
    assert ref.mutations == () and ref.completion == ps[6].solution


def test_pass_at_k_on_the_suite_lies_strictly_between_0_and_1():
    result = code.evaluate(code.problems(), code.MutationSampler(seed=0), n=5, ks=(1, 2, 5))
    total = sum(result["status_counts"].values())
    assert total == 5 * len(code.problems())
    rate = result["status_counts"]["passed"] / total
    assert 0 < rate < 1
    p1, p2, p5 = result["pass@1"], result["pass@2"], result["pass@5"]
    assert 0 < p1 < p2 < p5 < 1
    assert p1 == pytest.approx(rate)  # pass@1 is the mean pass rate
    cs = [v["c"] for v in result["problems"].values()]
    assert p2 == pytest.approx(sum(X.pass_at_k(5, c, 2) for c in cs) / len(cs))
    assert result["status_counts"].get("wrong_answer", 0) > 0
