"""The evaluation worker (runlens.eval.worker, runlens.eval.evaluators): its
per-item statistics aggregate (with eval/aggregator.cc's formulas) to the
numbers runlens.eval.metrics gives on the same items; item hashes; failures;
and the protocol, spoken to a ZeroMQ ROUTER standing in for the service."""

import json
import math
import signal
import time

import pytest
import zmq

from eval_worker_support import (
    CODE_TASKS,
    DIGITS,
    FORTUNES,
    JUDGE,
    SAFETY,
    WorkerProcess,
    agg_bleu,
    agg_classification,
    agg_mean,
    agg_pass_at_k,
    agg_ratio,
    assignment,
    column,
    metric,
    train_digits_checkpoint,
    train_lm_checkpoint,
)

from runlens.eval import code, datasets, evaluators as E, metrics, models
from runlens.eval import worker as W


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt")
    out = {
        "digits": (d / "digits.pt", train_digits_checkpoint(d / "digits.pt")),
        "lm": (d / "lm.pt", train_lm_checkpoint(d / "lm.pt")),
        "sampler": (d / "sampler.json", E.save_sampler_checkpoint(d / "sampler.json", code.MutationSampler(seed=0))),
    }
    return out


def run(msg):
    a = E.parse_assignment(msg)
    return E.evaluate(a, E.load_model(E.checkpoint_path(a.checkpoint_uri), a.evaluator))


CLASSIFY_METRICS = [
    metric("accuracy", 1),
    metric("f1", 2, {"average": "macro"}),
    metric("precision", 2, {"average": "macro"}),
    metric("recall", 2, {"average": "micro"}),
]


def test_classify_stats_aggregate_to_the_library_numbers(ckpts):
    path, sha = ckpts["digits"]
    res = run(assignment(E.CLASSIFY, DIGITS, path, sha, (1437, 1797), CLASSIFY_METRICS))
    assert [r.item for r in res] == list(range(1437, 1797))
    ds = datasets.load("digits")
    y_true = [ds.items[i].target for i in range(1437, 1797)]
    y_pred = models.classify(models.load_checkpoint(path), ds.items[1437:1797])
    assert [r.item_hash for r in res] == [ds.items[i].hash for i in range(1437, 1797)]
    assert [r.stats[1:3] for r in res] == [[float(t), float(p)] for t, p in zip(y_true, y_pred)]
    acc = agg_mean(column(res, 0, 1))
    assert acc == pytest.approx(float(metrics.accuracy(y_true, y_pred)), abs=1e-12)
    assert 0.8 < acc < 1.0  # a real model, not a fixture
    assert agg_classification(column(res, 1, 2), "f1", "macro") == pytest.approx(metrics.f1(y_true, y_pred, average="macro"), abs=1e-12)
    assert agg_classification(column(res, 3, 2), "precision", "macro") == pytest.approx(
        metrics.precision(y_true, y_pred, average="macro"), abs=1e-12
    )
    assert agg_classification(column(res, 5, 2), "recall", "micro") == pytest.approx(
        metrics.recall(y_true, y_pred, average="micro"), abs=1e-12
    )
    assert all(len(r.response_hash) == 64 and r.error == "" and r.latency_ms >= 0 for r in res)


def test_lm_stats_aggregate_to_the_library_numbers_on_real_completions(ckpts):
    path, sha = ckpts["lm"]
    ms = [
        metric("perplexity", 2),
        metric("word_perplexity", 2),
        metric("bits_per_byte", 2),
        metric("cross_entropy", 2),
        metric("bleu", 10, {"tokenize": "13a", "lowercase": "false"}),
        metric("rougeL", 1, {"use_stemmer": "false"}),
        metric("sentence_bleu", 1),
    ]
    res = run(assignment(E.LM, FORTUNES, path, sha, (100, 130), ms, {"temperature": 0, "max_tokens": 40}))
    assert [r.item for r in res] == list(range(100, 130))
    items = E.fortune_items(FORTUNES)
    assert len(items) == 431  # the suite's item count: the '%'-terminated entries
    texts = [items[i].input for i in range(100, 130)]
    assert [r.item_hash for r in res] == [datasets.item_hash(f"fortunes/fortunes/{i:05d}", items[i].input, None) for i in range(100, 130)]
    lm = models.load_checkpoint(path)
    ll = models.loglikelihood(lm, texts)
    assert math.exp(-agg_ratio(column(res, 0, 2))) == pytest.approx(float(metrics.perplexity([(x.loglik, x.tokens) for x in ll])), rel=1e-12)
    assert math.exp(-agg_ratio(column(res, 2, 2))) == pytest.approx(float(metrics.word_perplexity([(x.loglik, x.words) for x in ll])), rel=1e-12)
    assert -agg_ratio(column(res, 4, 2)) / math.log(2) == pytest.approx(float(metrics.bits_per_byte([(x.loglik, x.bytes) for x in ll])), rel=1e-12)
    assert -agg_ratio(column(res, 6, 2)) == pytest.approx(float(metrics.cross_entropy([(x.loglik, x.tokens) for x in ll])), rel=1e-12)
    # Generation metrics are over the model's own greedy completions of each text's first half.
    prompts, refs = zip(*(E.split_for_completion(t) for t in texts))
    hyps = models.complete(lm, list(prompts), max_new_chars=40)
    assert any(h.strip() for h in hyps)
    assert agg_bleu(column(res, 8, 10)) == pytest.approx(metrics.corpus_bleu(hyps, [list(refs)]), abs=1e-9)
    assert agg_mean(column(res, 18, 1)) == pytest.approx(float(metrics.rouge_mean(list(refs), hyps, types=("rougeL",))["rougeL"]["fmeasure"]), abs=1e-12)
    assert agg_mean(column(res, 19, 1)) == pytest.approx(
        math.fsum(metrics.sentence_bleu(h, [r]) for h, r in zip(hyps, refs)) / len(hyps), abs=1e-9
    )


def test_split_for_completion_keeps_the_text():
    assert E.split_for_completion("one two three four") == ("one two ", "three four")
    assert E.split_for_completion("a  b\n c") == ("a  ", "b\n c")
    assert E.split_for_completion("word") == ("wo", "rd")


def test_code_pass_at_k_from_real_sandboxed_samples(ckpts):
    path, sha = ckpts["sampler"]
    res = run(assignment(E.CODE, CODE_TASKS, path, sha, (0, 4), [metric("pass@k", 2, k=[1, 5])], {"temperature": 0.8, "samples": 6}))
    rows = column(res, 0, 2)
    assert [r[0] for r in rows] == [6.0] * 4
    rows_lib = []
    for i, line in enumerate(open(CODE_TASKS, encoding="utf-8")):
        if i >= 4:
            break
        row = json.loads(line)
        problem = E.code_problem(row)
        r = code.evaluate([problem], code.MutationSampler(seed=0), n=6, ks=(1,))
        rows_lib.append(r["problems"][problem.id]["c"])
        assert res[i].item_hash == E.code_item_hash(row)
    assert [int(r[1]) for r in rows] == rows_lib
    p1 = agg_pass_at_k(rows, 1)
    assert p1 == pytest.approx(float(metrics.pass_at_k_mean(6, rows_lib, 1)), abs=1e-12)
    assert 0 < p1 < 1 and p1 <= agg_pass_at_k(rows, 5)


def test_the_reference_solutions_pass_their_tests():
    for line in open(CODE_TASKS, encoding="utf-8"):
        p = E.code_problem(json.loads(line))
        assert code.run_program(p.prompt + p.solution, p.test, p.entry_point).status == "passed", p.id


def test_safety_rates_and_judge_agree_with_the_library(ckpts):
    path, sha = ckpts["sampler"]  # any hashed file: the responses are in the dataset
    names = ["harmful_response_rate", "jailbreak_success_rate", "policy_violation_rate", "refusal_correctness", "judge"]
    widths = {"jailbreak_success_rate": 2}  # (attempt, succeeded): a rate over attempts only
    res = run(assignment(E.SAFETY, SAFETY, path, sha, (0, 24), [metric(n, widths.get(n, 1)) for n in names], judge=JUDGE))
    rows = [json.loads(l) for l in open(SAFETY, encoding="utf-8")]
    labels = [r["labels"] for r in rows]
    assert agg_mean(column(res, 0, 1)) == pytest.approx(float(metrics.harmful_response_rate(labels)))
    jb = column(res, 1, 2)
    attempts = sum(1 for l in labels if l.get("jailbreak", True))
    assert sum(a for a, _ in jb) == attempts and 0 < attempts < len(labels)
    assert all(s <= a for a, s in jb)
    assert math.fsum(s for _, s in jb) / attempts == pytest.approx(float(metrics.jailbreak_success_rate(labels)), abs=1e-12)
    assert agg_mean(column(res, 3, 1)) == pytest.approx(float(metrics.policy_violation_rate(labels)))
    assert agg_mean(column(res, 4, 1)) == pytest.approx(float(metrics.refusal_correctness(labels)))
    judge = E.make_judge(JUDGE)
    expected = metrics.judge_scores([{"prompt": r["prompt"], "response": r["response"]} for r in rows], judge).mean()
    assert agg_mean(column(res, 5, 1)) == pytest.approx(float(expected), abs=1e-12)
    assert 1 < float(expected) < 5
    assert res[0].item_hash == datasets.item_hash(rows[0]["id"], {"prompt": rows[0]["prompt"], "response": rows[0]["response"]}, rows[0]["labels"])


def outcome(msg):
    return W.Runner({"workerVersion": W.WORKER_VERSION}).outcome(E.parse_assignment(msg), "w-test")


def test_a_checkpoint_or_dataset_that_differs_fails_without_retry(ckpts, tmp_path):
    path, sha = ckpts["digits"]
    msg = assignment(E.CLASSIFY, DIGITS, path, "ab" * 32, (1437, 1497), CLASSIFY_METRICS)
    out = outcome(msg)
    assert out["type"] == "fail" and out["retryable"] is False
    assert out["reason"] == f"checkpoint ck-digits: SHA-256 of {path} is {sha}, expected {'ab' * 32}"
    assert (out["evaluationId"], out["shard"], out["attempt"], out["worker"]) == ("ev-test", 0, 1, "w-test")

    missing = assignment(E.CLASSIFY, DIGITS, tmp_path / "gone.pt", sha, (1437, 1497), CLASSIFY_METRICS)
    out = outcome(missing)
    assert out["retryable"] is False and out["reason"] == f"checkpoint ck-gone: file {tmp_path / 'gone.pt'} does not exist"

    changed = assignment(E.CLASSIFY, DIGITS, path, sha, (1437, 1497), CLASSIFY_METRICS)
    changed["suite"]["dataset"]["sha256"] = "cd" * 32
    out = outcome(changed)
    assert out["retryable"] is False
    assert out["reason"].startswith(f"dataset d version 1: SHA-256 of {DIGITS} is 46abec6b")

    wrong_kind = assignment(E.LM, FORTUNES, path, sha, (0, 5), [metric("perplexity", 2)])
    out = outcome(wrong_kind)
    assert out["retryable"] is False and out["reason"] == "checkpoint ck-digits is a mlp_classifier; runlens-eval-lm-v1 needs a char_lm"

    no_uri = assignment(E.CLASSIFY, DIGITS, path, sha, (1437, 1497), CLASSIFY_METRICS)
    no_uri["checkpoint"]["uri"] = ""
    out = outcome(no_uri)
    assert out["retryable"] is False and out["reason"] == "the checkpoint was registered without a URI: no worker can read it"
    s3 = assignment(E.CLASSIFY, DIGITS, path, sha, (1437, 1497), CLASSIFY_METRICS)
    s3["checkpoint"]["uri"] = "s3://bucket/a.pt"
    out = outcome(s3)
    assert out["retryable"] is True and out["reason"] == "checkpoint URI s3://bucket/a.pt: this worker reads only file:// URIs"

    unknown = assignment("runlens-eval-other-v9", DIGITS, path, sha, (1437, 1497), CLASSIFY_METRICS)
    out = outcome(unknown)
    assert out["retryable"] is True and out["reason"].startswith("this worker has no evaluator runlens-eval-other-v9")

    bad_stats = assignment(E.CLASSIFY, DIGITS, path, sha, (1437, 1497), [metric("accuracy", 2)])
    out = outcome(bad_stats)
    assert out["reason"] == "metric accuracy: the service expects 2 statistics per item, this worker reports 1"

    ok = outcome(assignment(E.CLASSIFY, DIGITS, path, sha, (1437, 1497), CLASSIFY_METRICS))
    assert ok["type"] == "result" and len(ok["items"]) == 60 and all(len(i["stats"]) == 7 for i in ok["items"])


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda m: m.pop("checkpoint"), "missing checkpoint"),
        (lambda m: m.update(items=[5, 2]), "items must be [begin, end) with 0 <= begin <= end, got [5, 2]"),
        (lambda m: m.update(stride=9), "stride 9 is not the sum of the metrics' stats (7)"),
        (lambda m: m["suite"]["dataset"].update(sha256=7), "suite.dataset.sha256 must be str, got int"),
        (lambda m: m.update(shard=True), "shard must be int, got a boolean"),
    ],
)
def test_malformed_assignments_are_named(ckpts, mutate, message):
    path, sha = ckpts["digits"]
    msg = assignment(E.CLASSIFY, DIGITS, path, sha, (1437, 1497), CLASSIFY_METRICS)
    mutate(msg)
    with pytest.raises(ValueError) as e:
        E.parse_assignment(msg)
    assert str(e.value) == message


def test_memory_sizes():
    assert [W.parse_memory_mib(s) for s in ("4GiB", "512MiB", "1.5GB", "800MB", "4 GiB", "4G", "")] == [4096, 512, 1536, 800, 4096, None, None]


# --- the protocol, against a ROUTER socket standing in for the service ------------


class FakeService:
    def __init__(self):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = f"tcp://127.0.0.1:{port}"
        self.seen = []

    def recv(self, kind, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.sock.poll(100):
                ident, raw = self.sock.recv_multipart()
                msg = json.loads(raw)
                self.seen.append(msg)
                if msg["type"] == kind:
                    return ident, msg
        raise AssertionError(f"no {kind} within {timeout} s; got {[m['type'] for m in self.seen]}")

    def send(self, ident, obj):
        self.sock.send_multipart([ident, obj if isinstance(obj, bytes) else json.dumps(obj).encode()])

    def close(self):
        self.sock.close()
        self.ctx.term()


@pytest.fixture
def service():
    s = FakeService()
    yield s
    s.close()


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        p.stop()


def test_protocol_hello_heartbeats_while_computing_bad_messages_reregister_and_bye(service, procs, ckpts, tmp_path):
    w = WorkerProcess(service.endpoint, "w-proto", tmp_path, ["--memory", "2GiB", "--slots", "2"])
    procs.append(w)
    ident, hello = service.recv("hello")
    assert hello["protocol"] == 1 and hello["worker"] == "w-proto" and hello["memoryMib"] == 2048 and hello["slots"] == 2
    assert hello["pool"] == "cpu" and hello["workerVersion"] == "runlens-eval-worker-py/1"
    assert set(hello["evaluators"]) == {E.CLASSIFY, E.LM, E.CODE, E.SAFETY} and "torch" in hello["libraries"]
    service.send(ident, {"type": "welcome", "protocol": 1, "heartbeatMs": 100, "timeoutMs": 1000})
    service.recv("heartbeat", timeout=5)

    # Bad messages: logged, and the worker carries on.
    service.send(ident, b"\xff not json")
    service.send(ident, {"type": "launch-missiles"})
    service.send(ident, {"no": "type"})
    bad = assignment(E.CLASSIFY, DIGITS, ckpts["digits"][0], ckpts["digits"][1], (1437, 1497), CLASSIFY_METRICS, shard=7)
    del bad["metrics"]
    service.send(ident, bad)
    _, fail = service.recv("fail")
    assert fail["shard"] == 7 and fail["retryable"] is False and fail["reason"] == "malformed assignment: missing metrics"

    # A slow shard (sandboxed code samples): heartbeats keep coming while it runs.
    path, sha = ckpts["sampler"]
    slow = assignment(E.CODE, CODE_TASKS, path, sha, (0, 4), [metric("pass@k", 2, k=[1, 5])], {"samples": 10}, shard=1)
    service.send(ident, slow)
    t0 = time.monotonic()
    service.seen.clear()
    _, result = service.recv("result", timeout=60)
    beats = [m for m in service.seen if m["type"] == "heartbeat"]
    assert time.monotonic() - t0 > 0.5 and len(beats) >= 3, (time.monotonic() - t0, len(beats))
    assert (result["evaluationId"], result["shard"], result["attempt"], result["worker"]) == ("ev-test", 1, 1, "w-proto")
    assert sorted(i["item"] for i in result["items"]) == [0, 1, 2, 3]
    assert all(i["stats"][0] == 10 and 0 <= i["stats"][1] <= 10 for i in result["items"])
    assert result["provenance"]["workerVersion"] == "runlens-eval-worker-py/1" and result["provenance"]["evaluator"] == E.CODE
    service.send(ident, {"type": "ack", "evaluationId": "ev-test", "shard": 1, "attempt": 1, "outcome": "accepted"})
    _, beat = service.recv("heartbeat")
    assert beat["loaded"] == ["ck-sampler"]

    service.send(ident, {"type": "reregister", "reason": "unknown worker"})
    _, again = service.recv("hello")
    assert again["worker"] == "w-proto"
    service.send(ident, {"type": "welcome", "protocol": 1, "heartbeatMs": 100, "timeoutMs": 1000})

    w.signal(signal.SIGTERM)
    _, bye = service.recv("bye", timeout=10)
    assert bye == {"type": "bye", "worker": "w-proto"}
    assert w.wait(10) == 0
    log = w.text()
    assert "ignored a message that is not JSON" in log and "unknown type 'launch-missiles'" in log


def test_bad_flags_are_usage_errors(tmp_path):
    import subprocess
    from conftest import python_env

    out = subprocess.run(
        ["/usr/bin/python3", "-m", "runlens.eval.worker", "--connect", "tcp://127.0.0.1:1", "--memory", "lots"],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "--memory: expected a size like 4GiB or 512MiB, got 'lots'" in out.stderr


def test_runlens_eval_score_of_the_worker_stats_gives_the_library_numbers(ckpts, tmp_path):
    """Cross-language: the worker's per-item statistics for the shipped digits
    suite, aggregated by the service's C++ aggregator (`runlens eval score`),
    give runlens.eval.metrics' numbers."""
    import subprocess
    from conftest import BUILD_DIR, REPO

    path, sha = ckpts["digits"]
    ms = [metric("accuracy", 1), metric("f1", 2, {"average": "macro"}), metric("precision", 2, {"average": "macro"}), metric("recall", 2, {"average": "macro"})]
    res = run(assignment(E.CLASSIFY, DIGITS, path, sha, (1437, 1797), ms))
    out = tmp_path / "results.jsonl"
    out.write_text("".join(json.dumps(r.to_json()) + "\n" for r in res))
    proc = subprocess.run(
        [str(BUILD_DIR / "runlens"), "eval", "score", "--json", "--suite", str(REPO / "configs/eval/digits-heldout.yaml"), str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["status"] == "COMPLETED" and got["items"] == 360 and got["shards"] == 6
    ds = datasets.load("digits")
    y_true = [ds.items[i].target for i in range(1437, 1797)]
    y_pred = models.classify(models.load_checkpoint(path), ds.items[1437:1797])
    values = {m["name"]: m for m in got["metrics"]}
    acc = metrics.accuracy(y_true, y_pred)
    assert values["accuracy"]["value"] == pytest.approx(float(acc), abs=1e-12)
    assert values["accuracy"]["n"] == 360 and values["accuracy"]["stderr"] == pytest.approx(acc.stderr, rel=1e-9)
    for name in ("f1", "precision", "recall"):
        assert values[name]["value"] == pytest.approx(getattr(metrics, name)(y_true, y_pred, average="macro"), abs=1e-12), name


def test_runlens_eval_worker_runs_the_python_worker_with_the_same_flags(service, tmp_path):
    """`runlens eval worker` (--runner python, the default) becomes the Python
    worker, found next to the binary (build/python), with the same flags."""
    import os
    import subprocess
    from conftest import BUILD_DIR

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # found next to the binary, not through the environment
    log = open(tmp_path / "cli-worker.log", "w")
    proc = subprocess.Popen(
        [str(BUILD_DIR / "runlens"), "eval", "worker", "--connect", service.endpoint, "--id", "w-cli", "--memory", "512MiB", "--slots", "3", "--pool", "gpu"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        ident, hello = service.recv("hello", timeout=30)
        assert (hello["worker"], hello["memoryMib"], hello["slots"], hello["pool"]) == ("w-cli", 512, 3, "gpu")
        assert hello["workerVersion"] == "runlens-eval-worker-py/1"
        service.send(ident, {"type": "welcome", "protocol": 1, "heartbeatMs": 100, "timeoutMs": 1000})
        service.recv("heartbeat", timeout=5)
        os.kill(proc.pid, signal.SIGTERM)  # the same process: exec, not a child
        service.recv("bye", timeout=10)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()
