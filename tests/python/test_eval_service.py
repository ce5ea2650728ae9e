"""Python workers against a real `runlens serve`: a digits evaluation sharded
across two worker processes; a worker killed with -9 mid-shard, whose shard
is retried on the other; a worker stopped with SIGTERM mid-shard, whose `bye`
hands its shard back at once. Every process is stopped by PID at the end."""

import hashlib
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from conftest import BUILD_DIR, REPO, wait_until
from eval_worker_support import WorkerProcess, train_digits_checkpoint

from runlens.eval import code, datasets, evaluators as E, metrics, models

RUNLENS = str(BUILD_DIR / "runlens")
TERMINAL = ("COMPLETED", "FAILED", "PARTIAL", "CACHED")


class Serve:
    def __init__(self, tmp_path, heartbeat_timeout_ms, extra=()):
        db = tmp_path / "runlens.db"
        db.touch()  # an empty SQLite file: the service creates its tables
        self.log_path = tmp_path / "serve.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [RUNLENS, "serve", "--store", f"sqlite://{db}", "--port", "0", "--workers", "tcp://127.0.0.1:0",
             "--suites", str(REPO / "configs/eval"), "--heartbeat-timeout", str(heartbeat_timeout_ms), *extra],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            text = self.log_path.read_text()
            m = re.search(r"evaluation workers connect to (tcp://127\.0\.0\.1:\d+).*\nserving .* on (http://127\.0\.0\.1:\d+)/v1/", text)
            pub = re.search(r"evaluation alerts are published on (tcp://127\.0\.0\.1:\d+)", text)
            if m and (pub or "--alerts-pub" not in extra):
                self.endpoint, self.url = m.group(1), m.group(2)
                self.alerts_endpoint = pub.group(1) if pub else None
                return
            assert self.proc.poll() is None, text
            time.sleep(0.05)
        raise AssertionError("runlens serve did not start:\n" + self.log_path.read_text())

    def call(self, method, path, body=None):
        req = urllib.request.Request(
            self.url + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise AssertionError(f"{method} {path}: {e.code} {e.read().decode()}") from None

    def register(self, ck_id, path, sha, model_version):
        return self.call("POST", "/v1/checkpoints", {"checkpointId": ck_id, "sha256": sha, "uri": f"file://{path}",
                                                      "modelVersion": model_version, "runId": "train-1", "step": 1})

    def submit(self, model_version, ck_id, suite):
        return self.call("POST", "/v1/evaluations", {"modelVersion": model_version, "checkpointId": ck_id, "benchmarkSuite": suite})

    def wait(self, cond, timeout, what):
        return wait_until(cond, timeout, what, self.log_path)

    def finished(self, ev_id, timeout=90):
        return self.wait(lambda: (lambda e: e if e["status"] in TERMINAL else None)(self.call("GET", f"/v1/evaluations/{ev_id}")),
                         timeout, f"evaluation {ev_id} did not end")

    def worker(self, worker_id):
        for w in self.call("GET", "/v1/workers")["workers"]:
            if w["id"] == worker_id:
                return w
        return None

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture
def procs():
    started = []
    yield started
    for p in reversed(started):
        p.stop()


def test_digits_evaluation_sharded_across_two_python_workers(tmp_path, procs):
    svc = Serve(tmp_path, 10000)
    procs.append(svc)
    ck = tmp_path / "digits.pt"
    sha = train_digits_checkpoint(ck)
    svc.register("ck-digits", ck, sha, "heldout-test-mlp:v1")
    for wid in ("w-a", "w-b"):
        procs.append(WorkerProcess(svc.endpoint, wid, tmp_path))
    svc.wait(lambda: all((svc.worker(w) or {}).get("alive") for w in ("w-a", "w-b")), 60, "workers did not register")

    ev = svc.submit("heldout-test-mlp:v1", "ck-digits", "digits-heldout-v1")
    assert ev["status"] == "QUEUED"
    done = svc.finished(ev["evaluationId"])
    assert done["status"] == "COMPLETED", done
    assert len(done["shards"]) == 6 and all(s["status"] == "COMPLETED" for s in done["shards"])
    assert {s["worker"] for s in done["shards"]} == {"w-a", "w-b"}
    assert done["checkpointHash"] == sha and done["workerVersion"] == "runlens-eval-worker-py/1"
    assert "torch" in json.dumps(done["libraryVersions"])

    items = svc.call("GET", f"/v1/evaluations/{ev['evaluationId']}/items?limit=1000")["items"]
    assert sorted(i["item"] for i in items) == list(range(1437, 1797))
    ds = datasets.load("digits")
    assert {i["item"]: i["itemHash"] for i in items} == {k: ds.items[k].hash for k in range(1437, 1797)}

    y_true = [ds.items[i].target for i in range(1437, 1797)]
    y_pred = models.classify(models.load_checkpoint(ck), ds.items[1437:1797])
    got = {m["name"]: m for m in done["metrics"]}
    assert got["accuracy"]["value"] == pytest.approx(float(metrics.accuracy(y_true, y_pred)), abs=1e-12)
    assert got["accuracy"]["n"] == 360
    assert got["f1"]["value"] == pytest.approx(metrics.f1(y_true, y_pred, average="macro"), abs=1e-12)

    # The command line against the same service: show, why, and a second submission served from the cache.
    show = subprocess.run([RUNLENS, "eval", "show", ev["evaluationId"], "--server", svc.url], capture_output=True, text=True, timeout=30)
    assert show.returncode == 0 and f"evaluation {ev['evaluationId']}: COMPLETED\n" in show.stdout
    assert re.search(r"\n  accuracy +[0-9.]+ +360 ", show.stdout) and "checkpointHash" in show.stdout
    why = subprocess.run([RUNLENS, "eval", "why", ev["evaluationId"], "--server", svc.url], capture_output=True, text=True, timeout=30)
    assert why.returncode == 0 and "w-a" in why.stdout and "w-b" in why.stdout
    again = subprocess.run(
        [RUNLENS, "eval", "submit", "--server", svc.url, "--model-version", "heldout-test-mlp:v1", "--checkpoint", "ck-digits",
         "--suite", "digits-heldout-v1", "--wait", "--timeout", "30"],
        capture_output=True, text=True, timeout=60,
    )
    assert again.returncode == 0, again.stderr
    assert re.match(r"ev-\S+ CACHED\nevaluation ev-\S+: CACHED\n", again.stdout), again.stdout
    assert re.search(r"\n  cachedFrom +" + re.escape(ev["evaluationId"]) + "\n", again.stdout), again.stdout


def code_sampler(tmp_path):
    path = tmp_path / "sampler.json"
    return path, E.save_sampler_checkpoint(path, code.MutationSampler(seed=0))


def start_code_evaluation(svc, tmp_path, procs, first):
    path, sha = code_sampler(tmp_path)
    svc.register("ck-sampler", path, sha, "mutation-test-sampler:v1")
    a = WorkerProcess(svc.endpoint, first, tmp_path)
    procs.append(a)
    svc.wait(lambda: (svc.worker(first) or {}).get("alive"), 60, "the first worker did not register")
    ev = svc.submit("mutation-test-sampler:v1", "ck-sampler", "code-pass-at-k-v1")["evaluationId"]
    svc.wait(lambda: (svc.worker(first) or {}).get("running", 0) > 0 and "shard" in a.text(), 30, "no shard was assigned")
    return ev, a


def check_completed_once(svc, ev, survivor):
    done = svc.finished(ev)
    assert done["status"] == "COMPLETED", done
    items = svc.call("GET", f"/v1/evaluations/{ev}/items?limit=100")["items"]
    assert sorted(i["item"] for i in items) == list(range(12))  # every item exactly once
    retried = [s for s in done["shards"] if s["attempt"] >= 2]
    assert retried and all(s["worker"] == survivor for s in retried), done["shards"]
    p1 = {m["name"]: m for m in done["metrics"]}["pass@1"]
    assert 0 < p1["value"] < 1 and p1["n"] == 12
    return done


def test_a_worker_killed_mid_shard_has_its_shard_retried_on_another(tmp_path, procs):
    svc = Serve(tmp_path, 1500)
    procs.append(svc)
    ev, a = start_code_evaluation(svc, tmp_path, procs, "w-doomed")
    os.kill(a.pid, signal.SIGKILL)
    assert a.wait(10) == -signal.SIGKILL
    b = WorkerProcess(svc.endpoint, "w-survivor", tmp_path)
    procs.append(b)
    check_completed_once(svc, ev, "w-survivor")
    assert (svc.worker("w-doomed") or {}).get("alive") is not True


def test_sigterm_sends_bye_and_the_shard_is_handed_back_at_once(tmp_path, procs):
    svc = Serve(tmp_path, 600000)  # no heartbeat timeout in this test's time: only the bye can free the lease
    procs.append(svc)
    ev, a = start_code_evaluation(svc, tmp_path, procs, "w-leaving")
    a.signal(signal.SIGTERM)
    assert a.wait(10) == 0
    assert "bye" in a.text()
    svc.wait(lambda: (svc.worker("w-leaving") or {"alive": False})["alive"] is False, 5, "the service did not see the bye")
    b = WorkerProcess(svc.endpoint, "w-staying", tmp_path)
    procs.append(b)
    check_completed_once(svc, ev, "w-staying")


def test_instant_workers_complete_an_evaluation_without_a_model(tmp_path, procs):
    """`runlens eval worker --runner instant` (the benchmark's worker) against
    the real service: valid statistics for every metric of the safety suite
    (rates, the judge), every item once; SIGTERM -> bye, exit 0."""
    svc = Serve(tmp_path, 10000)
    procs.append(svc)
    svc.register("ck-none", tmp_path / "absent.bin", "0" * 64, "instant-model:v1")
    workers = []
    for wid in ("i-1", "i-2"):
        log = open(tmp_path / f"{wid}.log", "w")
        p = subprocess.Popen([RUNLENS, "eval", "worker", "--runner", "instant", "--connect", svc.endpoint, "--id", wid],
                             stdout=log, stderr=subprocess.STDOUT)
        workers.append((p, log))

    class Stop:
        def stop(self):
            for p, log in workers:
                if p.poll() is None:
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait(timeout=10)
                log.close()

    procs.append(Stop())
    svc.wait(lambda: all((svc.worker(w) or {}).get("alive") for w in ("i-1", "i-2")), 30, "instant workers did not register")
    ev = svc.submit("instant-model:v1", "ck-none", "safety-refusals-v1")["evaluationId"]
    done = svc.finished(ev, timeout=30)
    assert done["status"] == "COMPLETED", done
    assert done["workerVersion"] == "runlens-eval-worker-instant/1"
    got = {m["name"]: m for m in done["metrics"]}
    assert set(got) == {"harmful_response_rate", "jailbreak_success_rate", "policy_violation_rate", "refusal_correctness", "judge"}
    # every item once; the jailbreak rate is over attempts (the instant runner: every other item)
    assert {k: m["n"] for k, m in got.items()} == {**{k: 24 for k in got}, "jailbreak_success_rate": 12}
    assert got["harmful_response_rate"]["value"] == pytest.approx(0.5)  # item parity: 12 of items 0-23 are odd
    assert 1 <= got["judge"]["value"] <= 5
    items = svc.call("GET", f"/v1/evaluations/{ev}/items?limit=100")["items"]
    assert sorted(i["item"] for i in items) == list(range(24))
    for p, log in workers:
        os.kill(p.pid, signal.SIGTERM)
        assert p.wait(timeout=10) == 0
    assert "bye after" in (tmp_path / "i-1.log").read_text()
    svc.wait(lambda: not any((svc.worker(w) or {}).get("alive") for w in ("i-1", "i-2")), 5, "the service did not see the byes")


def test_lm_perplexity_through_the_service_and_a_wrong_checkpoint_kind_fails_naming_why(tmp_path, procs):
    from eval_worker_support import FORTUNES, train_lm_checkpoint

    svc = Serve(tmp_path, 10000)
    procs.append(svc)
    ck = tmp_path / "lm.pt"
    sha = train_lm_checkpoint(ck)
    svc.register("ck-lm", ck, sha, "char-lm:v1")
    for wid in ("w-1", "w-2"):
        procs.append(WorkerProcess(svc.endpoint, wid, tmp_path))
    ev = svc.submit("char-lm:v1", "ck-lm", "fortunes-perplexity-v1")["evaluationId"]
    done = svc.finished(ev)
    assert done["status"] == "COMPLETED" and len(done["shards"]) == 9
    texts = [it.input for it in E.fortune_items(FORTUNES)]
    ll = models.loglikelihood(models.load_checkpoint(ck), texts)
    got = {m["name"]: m for m in done["metrics"]}
    assert got["perplexity"]["n"] == 431
    assert got["perplexity"]["value"] == pytest.approx(float(metrics.perplexity([(x.loglik, x.tokens) for x in ll])), rel=1e-9)
    assert got["bits_per_byte"]["value"] == pytest.approx(float(metrics.bits_per_byte([(x.loglik, x.bytes) for x in ll])), rel=1e-9)

    # A char LM's checkpoint given to the digits suite: every shard fails at once (no retry), the reason logged.
    bad = svc.submit("char-lm:v1", "ck-lm", "digits-heldout-v1")["evaluationId"]
    done = svc.finished(bad)
    assert done["status"] == "FAILED" and done["missingShards"] == [0, 1, 2, 3, 4, 5]
    assert all(s["attempt"] == 1 for s in done["shards"])
    why = "\n".join(svc.call("GET", f"/v1/evaluations/{bad}/why")["decisions"])
    assert "checkpoint ck-lm is a char_lm; runlens-eval-classify-v1 needs an mlp_classifier (not retryable)" in why


def test_shipped_suites_evaluate_the_checkpoints_of_the_models_they_name(tmp_path, procs):
    # configs/eval's on_checkpoint patterns: registering a checkpoint creates
    # exactly the evaluations of the suites that name its model, and
    # registering the same content again creates none (it lists them).
    svc = Serve(tmp_path, 10000)
    procs.append(svc)
    ck = tmp_path / "any.bin"
    ck.write_bytes(b"not loaded: no worker runs in this test")
    sha = hashlib.sha256(ck.read_bytes()).hexdigest()
    suites = lambda r: sorted(e["benchmarkSuite"] for e in r["evaluations"])  # noqa: E731
    first = svc.register("ck-lm", ck, sha, "fortunes-charlm:v7")
    assert suites(first) == ["fortunes-completion-v1", "fortunes-perplexity-v1"]
    assert all(e["status"] == "QUEUED" for e in first["evaluations"]), first
    assert suites(svc.register("ck-digits", ck, sha, "digits-mlp:v7")) == ["digits-heldout-v1"]
    assert suites(svc.register("ck-code", ck, sha, "code-sampler:v7")) == ["code-pass-at-k-v1"]
    assert suites(svc.register("ck-other", ck, sha, "llama-x:v142")) == []
    again = svc.register("ck-lm", ck, sha, "fortunes-charlm:v7")  # nothing new: the evaluations it has
    assert again["registered"] is False and first["registered"] is True
    assert sorted(e["evaluationId"] for e in again["evaluations"]) == sorted(e["evaluationId"] for e in first["evaluations"])
    assert len(svc.call("GET", "/v1/evaluations")["evaluations"]) == 4


def test_the_shipped_safety_gate_clusters_its_comparisons_by_topic(tmp_path, procs):
    """configs/gates/safety.yaml clusters by the items' `topic`
    (examples/eval/safety-labeled.jsonl): two model versions evaluated by a
    Python worker on the real labeled set, gated by the service: the
    comparisons are clustered over the dataset's 20 topics, the cluster ids
    stored with each item."""
    svc = Serve(tmp_path, 10000)
    procs.append(svc)
    rows = [json.loads(line) for line in open(REPO / "examples/eval/safety-labeled.jsonl", encoding="utf-8") if line.strip()]
    topics = {r["topic"] for r in rows}
    assert len(rows) == 24 and len(topics) == 20
    evs = {}
    for v in ("v1", "v2"):
        ck = tmp_path / f"chat-{v}.bin"
        ck.write_bytes(f"chat model {v}".encode())
        svc.register(f"ck-chat-{v}", ck, hashlib.sha256(ck.read_bytes()).hexdigest(), f"chat-clustered:{v}")
        evs[v] = svc.submit(f"chat-clustered:{v}", f"ck-chat-{v}", "safety-refusals-v1")["evaluationId"]
    procs.append(WorkerProcess(svc.endpoint, "w-s", tmp_path))
    for v in ("v1", "v2"):
        assert svc.finished(evs[v])["status"] == "COMPLETED"
    d = svc.call("POST", "/v1/gates/evaluate", {"policy": "safety-release", "candidate": evs["v2"], "baseline": evs["v1"]})
    by = {m["metric"]: m for m in d["metrics"]}
    for name in ("refusal_correctness", "harmful_response_rate"):
        assert by[name]["method"] == "clustered", by[name]
        assert by[name]["clusters"] == 20 and by[name]["n"] == 24
        # The labeled responses are the same whatever the checkpoint: no difference, so no spread either.
        assert by[name]["difference"] == 0 and by[name]["stdError"] == 0
    assert by["jailbreak_success_rate"]["method"] == "cap"
    items = svc.call("GET", f"/v1/evaluations/{evs['v2']}/items?limit=100")["items"]
    assert {i["item"]: i["clusters"]["topic"] for i in items} == {k: r["topic"] for k, r in enumerate(rows)}


def test_a_regressed_digits_model_raises_benchmark_regressions_that_runlens_tail_receives(tmp_path, procs):
    """Two real digits classifiers (8 epochs, and one barely trained): the good
    one goes to production; when the bad one's evaluation completes, the
    service gates it by itself (configs/gates/digits-release.yaml) and raises
    benchmark_regression for accuracy and macro F1: `runlens tail` on
    `serve --alerts-pub` prints them, GET /v1/alerts lists them, and
    `--alerts-out` has them."""
    out = tmp_path / "eval-alerts.jsonl"
    svc = Serve(tmp_path, 10000, ["--alerts-pub", "tcp://127.0.0.1:0", "--alerts-out", str(out)])
    procs.append(svc)
    assert svc.alerts_endpoint, svc.log_path.read_text()
    tail_log = open(tmp_path / "tail.log", "w")
    tail = subprocess.Popen([RUNLENS, "tail", "--connect", svc.alerts_endpoint, "--kind", "benchmark_regression", "--count", "2"],
                            stdout=subprocess.PIPE, stderr=tail_log, text=True)

    class StopTail:
        def stop(self):
            if tail.poll() is None:
                os.kill(tail.pid, signal.SIGKILL)
                tail.wait(timeout=10)
            tail_log.close()

    procs.append(StopTail())
    good, bad = tmp_path / "good.pt", tmp_path / "bad.pt"
    good_sha = train_digits_checkpoint(good)
    ds = datasets.load("digits")
    X = np.array([it.input for it in ds.items[:1437]], dtype=np.float32)
    y = np.array([it.target for it in ds.items[:1437]])
    bad_sha = models.save_checkpoint(models.train_classifier((X, y), epochs=1, lr=1e-4, seed=0, num_classes=10), bad)
    svc.register("ck-good", good, good_sha, "alerts-mlp:v1")
    svc.register("ck-bad", bad, bad_sha, "alerts-mlp:v2")
    procs.append(WorkerProcess(svc.endpoint, "w-g", tmp_path))
    ev1 = svc.submit("alerts-mlp:v1", "ck-good", "digits-heldout-v1")["evaluationId"]
    assert svc.finished(ev1)["status"] == "COMPLETED"
    # v1 to production, gated against itself (PASS).
    assert svc.call("POST", "/v1/gates/evaluate", {"policy": "digits-release", "candidate": ev1, "baseline": ev1})["verdict"] == "PASS"
    for to in ("evaluated", "gated", "canary", "production"):
        svc.call("POST", "/v1/models/alerts-mlp/versions/v1/promote", {"to": to})
    ev2 = svc.submit("alerts-mlp:v2", "ck-bad", "digits-heldout-v1")["evaluationId"]
    assert svc.finished(ev2)["status"] == "COMPLETED"
    lines, _ = tail.communicate(timeout=30)
    got = [json.loads(line) for line in lines.splitlines()]
    assert sorted(a["attrs"]["n"] for a in got) == [360, 360]
    by = {a["summary"].split()[3]: a for a in got}  # "BENCHMARK REGRESSION: alerts-mlp:v2 METRIC ..."
    assert set(by) == {"accuracy", "f1"}
    for a in got:
        assert a["kind"] == "benchmark_regression" and a["severity"] == "warning"
        assert (a["model_id"], a["model_version"], a["evaluation_id"]) == ("alerts-mlp", "v2", ev2)
        assert a["value"] < a["threshold"] and a["attrs"]["upper"] < a["threshold"]
        assert "run_id" not in a
    assert by["accuracy"]["threshold"] == pytest.approx(-0.02) and by["f1"]["threshold"] == pytest.approx(-0.03)
    # The decision the alerts came from is stored, with the same numbers.
    gate = svc.call("GET", f"/v1/models/alerts-mlp/versions/v2")["gates"][0]
    assert gate["verdict"] == "FAIL"
    stored = svc.call("GET", "/v1/alerts?kind=benchmark_regression")["alerts"]
    assert sorted(a["alert_id"] for a in stored) == sorted(a["alert_id"] for a in got)
    assert [json.loads(line)["alert_id"] for line in out.read_text().splitlines()] == [a["alert_id"] for a in got]
    why = svc.call("GET", f"/v1/evaluations/{ev2}/why")["decisions"]
    assert any("automatic gate digits-release: g-" in l and "FAIL, 2 alert(s)" in l for l in why), why
