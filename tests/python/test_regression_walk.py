"""examples/regression_walk.py end to end: real training runs on real data
(scikit-learn's digits, Debian's fortunes) through the SDK, the pipeline and
the evaluation service with two workers; the gate that fails the run whose
learning rate was raised, the refused promotion, and the walk that names the
change. The numbers the service reports are checked against a direct
computation on the checkpoint files. Every process the scenario starts is
stopped by its PID before run_scenario returns (pass or fail)."""

import math
import sys

import numpy as np
import pytest

from conftest import BUILD_DIR, REPO

sys.path.insert(0, str(REPO / "examples"))
import regression_walk as W  # noqa: E402

from runlens.eval import datasets, evaluators as E, models  # noqa: E402

RUNLENS = str(BUILD_DIR / "runlens")
HELDOUT = range(1437, 1797)


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    return W.run_scenario(tmp_path_factory.mktemp("regression-walk"), RUNLENS, workers=2, timeout=150,
                          log=lambda *a: print(*a, flush=True))


def correct(path):
    """Per held-out item: 1 when the checkpoint's prediction is right."""
    ds = datasets.load("digits")
    items = [ds.items[i] for i in HELDOUT]
    pred = models.classify(models.load_checkpoint(path), items)
    return np.array([1.0 if p == it.target else 0.0 for p, it in zip(pred, items)])


def metric(ev, name):
    return {m["name"]: m for m in ev["metrics"]}[name]["value"]


def gate_metric(g, name):
    return {m["metric"]: m for m in g["metrics"]}[name]


def test_training_reports_train_and_validation_loss_and_the_lr_change(walk):
    good, bad = walk["digits"]["v141"], walk["digits"]["v142"]
    # The same run_start config, as the store holds it: only the mid-run change differs.
    assert walk["runs"]["v141"]["summary"]["config"] == walk["runs"]["v142"]["summary"]["config"] == good["config"]
    assert good["config"]["lr"] == 0.05 and good["config"]["dataset"] == "digits@1"
    assert good["val_accuracy"] > 0.95 and good["val_loss"] < 0.2
    assert bad["val_loss"] > 10 * good["val_loss"]  # clearly worse
    assert [h["lr"] for h in bad["history"] if h["step"] < 150] == [0.05] * 6
    assert {h["lr"] for h in bad["history"] if h["step"] >= 150} == {0.5}
    # What the pipeline stored: every step with loss, lr and grad_norm; val_loss every 25 steps; the change.
    steps = walk["runs"]["v142"]["steps"]
    assert [s["step"] for s in steps] == list(range(300))
    assert all(math.isfinite(s["loss"]) and s["gradNorm"] > 0 for s in steps)
    assert [s["learningRate"] for s in steps] == [0.05] * 150 + [0.5] * 150
    vals = {s["step"]: s["valLoss"] for s in steps if s.get("valLoss") is not None}
    assert sorted(vals) == list(range(24, 300, 25))  # every 25 steps, the last one included
    assert vals[299] == pytest.approx(bad["val_loss"], rel=1e-6)
    changes = [e for e in walk["runs"]["v142"]["timeline"] if e["kind"] == "config_change"]
    assert len(changes) == 1 and changes[0]["step"] == 150, changes
    assert "lr" in changes[0]["summary"] and "0.5" in changes[0]["summary"], changes[0]
    assert not [e for e in walk["runs"]["v141"]["timeline"] if e["kind"] == "config_change"]
    assert walk["runs"]["v142"]["summary"]["config"]["lr"] == 0.05  # run_start's


def test_the_service_evaluates_the_held_out_split_of_each_checkpoint(walk):
    for ck in ("v140", "v141", "v142"):
        ev = walk["evaluations"][f"digits-mlp:{ck}"]
        assert ev["status"] == "COMPLETED" and ev["benchmarkSuite"] == "digits-heldout-v1"
        ck_file = walk["digits"][ck]["checkpoints"][-1]
        assert ev["checkpointHash"] == ck_file["sha256"]
        assert metric(ev, "accuracy") == pytest.approx(correct(ck_file["path"]).mean(), abs=1e-12)
        assert {m["name"]: m["n"] for m in ev["metrics"]}["accuracy"] == 360
    assert metric(walk["evaluations"]["digits-mlp:v142"], "accuracy") < \
        metric(walk["evaluations"]["digits-mlp:v141"], "accuracy") - 0.04


def test_v141_passes_its_gate_and_is_promoted_to_production(walk):
    g = walk["gate_v141"]
    assert g["verdict"] == "PASS" and g["policy"] == "digits-release", g
    assert g["baselineEvaluation"] == walk["evaluations"]["digits-mlp:v140"]["evaluationId"]
    assert [p["to"] for p in walk["promote_v141"]] == ["gated", "canary", "production"]
    assert walk["status_v141"] == "production"
    chain = [(a["from"], a["to"], a["user"]) for a in walk["audit_v141"]]
    assert chain == [("registered", "evaluated", W.USER), ("evaluated", "gated", W.USER),
                     ("gated", "canary", W.USER), ("canary", "production", W.USER)], chain
    assert all(a["gateId"] == g["gateId"] for a in walk["audit_v141"][1:])


def test_the_gate_fails_v142_on_quality_with_the_paired_numbers(walk):
    g = walk["gate_v142"]
    assert g["verdict"] == "FAIL", g
    # No baseline named: the production version's (v141's) evaluation.
    assert g["baselineEvaluation"] == walk["evaluations"]["digits-mlp:v141"]["evaluationId"]
    assert g["candidateEvaluation"] == walk["evaluations"]["digits-mlp:v142"]["evaluationId"]
    acc = gate_metric(g, "accuracy")
    assert acc["dimension"] == "quality" and acc["method"] == "paired-mean" and acc["verdict"] == "FAIL"
    # The paired difference and its SE, computed here from the two checkpoint files.
    d = correct(walk["digits"]["v142"]["checkpoints"][-1]["path"]) - correct(
        walk["digits"]["v141"]["checkpoints"][-1]["path"])
    assert acc["n"] == 360
    assert acc["difference"] == pytest.approx(d.mean(), abs=1e-12)
    assert acc["stdError"] == pytest.approx(d.std(ddof=1) / math.sqrt(len(d)), rel=1e-9)
    assert acc["margin"] == 0.02 and acc["upper"] < -0.02
    assert any("accuracy" in reason for reason in g["reasons"]), g["reasons"]


def test_promotion_of_v142_is_refused_with_the_gate_reasons(walk):
    code, body = walk["promote_v142"]
    assert code == 409, body
    assert body["gateId"] == walk["gate_v142"]["gateId"]
    assert body["reasons"] == walk["gate_v142"]["reasons"]
    assert walk["status_v142"] == "evaluated"
    cli = walk["promote_v142_cli"]
    assert cli["rc"] != 0 and walk["gate_v142"]["gateId"] in cli["stderr"], cli


def test_the_prompt_pair_is_trained_identically_and_scored_differently(walk):
    a, b = walk["lm"]["lm-a"], walk["lm"]["lm-b"]
    assert a["val_loss"] == b["val_loss"] and a["sha256"] == b["sha256"]
    ea, eb = walk["evaluations"]["fortunes-lm:lm-a"], walk["evaluations"]["fortunes-lm:lm-b"]
    assert ea["status"] == eb["status"] == "COMPLETED"
    assert ea["benchmarkSuite"] == "fortunes-completion-v1" and eb["benchmarkSuite"] == "fortunes-completion-3q-v1"
    assert metric(eb, "rouge1") < metric(ea, "rouge1")


def test_the_lm_evaluator_cuts_the_prompt_as_the_suite_template_says():
    text = "one two three four five six seven eight"
    assert E.split_for_completion(text, E.prompt_fraction({"template": "{first half of the words}"})) == (
        "one two three four ", "five six seven eight")
    assert E.split_for_completion(text, E.prompt_fraction({"template": "{first quarter of the words}"})) == (
        "one two ", "three four five six seven eight")
    assert E.split_for_completion(text, E.prompt_fraction({"template": "{first three quarters of the words}"})) == (
        "one two three four five six ", "seven eight")
    assert E.prompt_fraction({"template": "{x}"}) == (1, 2)
    assert E.split_for_completion("one two three", (1, 4)) == ("one ", "two three")  # at least one word


def test_digits_train_rejects_a_malformed_lr_change(capsys):
    import digits_train

    assert digits_train.parse_args(["--lr-change", "150:0.5"]).lr_change == [(150, 0.5)]
    for bad, why in (("150", "expected STEP:LR"), ("x:0.5", "expected STEP:LR"), ("10:-1", "expected STEP:LR"),
                     ("300:0.5", "--lr-change step 300 is not below --steps 300")):
        with pytest.raises(SystemExit) as e:
            digits_train.parse_args(["--lr-change", bad])
        assert e.value.code == 2
        assert why in capsys.readouterr().err, bad


def test_explain_names_the_learning_rate_change_and_its_step(walk):
    e = walk["explain_v142"]
    assert e["modelVersion"] == "digits-mlp:v142" and e["baseline"] == "digits-mlp:v141"
    d = e["decision"]
    assert (d["cause"], d["owner"]) == ("config_change", "training"), d
    assert "lr 0.05 → 0.5 at step 150" in d["summary"], d["summary"]
    assert "lr 0.05 → 0.5 at step 150" in walk["explain_v142_text"], walk["explain_v142_text"]
    assert "config_change" in walk["explain_v142_text"] and "training" in walk["explain_v142_text"]
    levels = [lv["level"] for lv in e["walk"]]
    assert levels[:2] == ["modelVersion", "evaluation"] and "checkpoint" in levels and "trainingRun" in levels
    assert {lv["id"] for lv in e["walk"] if lv["level"] == "trainingRun"} == {walk["digits"]["v142"]["run_id"]}
    # The route with no baseline compares with production: v141.
    route = walk["explain_v142_route"]
    assert route["baseline"] == "digits-mlp:v141" and route["decision"]["cause"] == "config_change"


def test_compare_marks_the_learning_rate_and_pairs_the_benchmark(walk):
    c = walk["compare"]
    cfg = {k["key"]: k for k in c["config"]}
    lr = cfg["lr"]
    assert lr["changed"] and (lr["left"], lr["right"], lr["rightStep"]) == (0.05, 0.5, 150), lr
    assert [k for k, v in cfg.items() if v["changed"]] == ["lr"]
    assert c["metrics"]["valLoss"]["left"] == pytest.approx(walk["digits"]["v141"]["val_loss"], rel=1e-6)
    assert c["metrics"]["valLoss"]["right"] == pytest.approx(walk["digits"]["v142"]["val_loss"], rel=1e-6)
    (bench,) = [b for b in c["benchmarks"] if b["benchmark"] == "sklearn-digits"]
    assert bench["paired"] is True
    acc = {m["metric"]: m for m in bench["metrics"]}["accuracy"]
    g = gate_metric(walk["gate_v142"], "accuracy")
    assert acc["difference"] == pytest.approx(g["difference"], abs=1e-12)
    assert acc["stdError"] == pytest.approx(g["stdError"], rel=1e-9)
    assert acc["significant"] is True and acc["n"] == 360


def test_the_prompt_pair_is_an_evaluation_mismatch_not_a_training_regression(walk):
    e = walk["explain_lm"]
    assert (e["decision"]["cause"], e["decision"]["owner"]) == ("evaluation_mismatch", "evaluation"), e["decision"]
    assert "evaluation_mismatch" in walk["explain_lm_text"]
    c = walk["compare_lm"]
    assert c["metrics"]["valLoss"]["delta"] == 0
    assert not [k for k in c["config"] if k["changed"]]
    (bench,) = [b for b in c["benchmarks"] if b["benchmark"] == "fortunes-completion"]
    assert bench["paired"] is True  # the same items of the same file: the difference is paired
    prompt = {v["name"]: v for v in bench["versions"]}["prompt"]
    assert prompt["changed"] and "half-words-v1" in prompt["left"] and "three-quarter-words-v1" in prompt["right"]
    rouge = {m["metric"]: m for m in bench["metrics"]}["rouge1"]
    assert rouge["difference"] < 0


def test_the_failed_gate_raises_benchmark_regression_alerts(walk):
    g = walk["gate_v142"]
    ev = walk["evaluations"]["digits-mlp:v142"]["evaluationId"]
    alerts = {a["attrs"]["margin"]: a for a in walk["alerts"]}
    assert len(walk["alerts"]) == 2 and set(alerts) == {0.02, 0.03}, walk["alerts"]  # accuracy and f1
    for a in walk["alerts"]:
        assert a["kind"] == "benchmark_regression" and a["severity"] == "warning"
        assert (a["model_id"], a["model_version"], a["evaluation_id"]) == ("digits-mlp", "v142", ev)
        assert "runId" not in a and "run_id" not in a
    acc, m = alerts[0.02], gate_metric(g, "accuracy")
    assert acc["value"] == pytest.approx(m["difference"], abs=1e-12) and acc["threshold"] == -0.02
    assert acc["attrs"]["upper"] == pytest.approx(m["upper"], abs=1e-12) and acc["attrs"]["n"] == 360
    assert "digits-mlp:v142" in acc["summary"] and "accuracy" in acc["summary"] and g["gateId"] in acc["summary"]
    # serve --alerts-out wrote the same alerts.
    assert sorted(a["alert_id"] for a in walk["alerts_jsonl"]) == sorted(a["alert_id"] for a in walk["alerts"])


def test_digits_train_sends_what_a_collector_receives(collector, tmp_path):
    """examples/digits_train.py against a real ZeroMQ collector: run_start's
    config, train events with loss/lr/grad_norm (val_loss every --val-every
    steps), the lr change as a config_change event at its step, and a
    checkpoint event per saved file with its SHA-256."""
    import digits_train

    from conftest import has_run_end

    a = digits_train.parse_args(["--endpoint", collector.endpoint, "--run-id", "dt-1", "--checkpoint-id", "c1",
                                 "--out", str(tmp_path), "--steps", "20", "--val-every", "5",
                                 "--checkpoint-every", "10", "--lr-change", "12:0.2"])
    s = digits_train.train(a, log=lambda *x: None)
    collector.collect(until=has_run_end)
    (start,) = collector.of_type("run_start")
    assert start["run_id"] == "dt-1" and start["model_id"] == "digits-mlp" and start["model_version"] == "c1"
    assert {k: start["config"][k] for k in ("lr", "batch_size", "hidden", "seed", "dataset")} == {
        "lr": 0.05, "batch_size": 64, "hidden": "64", "seed": 0, "dataset": "digits@1"}
    train = sorted(collector.of_type("train"), key=lambda e: e["step"])
    assert [e["step"] for e in train] == list(range(20))
    assert [e["lr"] for e in train] == [0.05] * 12 + [0.2] * 8
    assert all(e["grad_norm"] > 0 and math.isfinite(e["loss"]) for e in train)
    assert [e["step"] for e in train if e.get("val_loss") is not None] == [4, 9, 14, 19]
    assert train[19]["val_loss"] == pytest.approx(s["val_loss"], rel=1e-6)
    (change,) = [e for e in collector.of_type("event") if e["kind"] == "config_change"]
    assert (change["step"], change["key"], change["old"], change["new"]) == (12, "lr", 0.05, 0.2)
    cks = sorted(collector.of_type("checkpoint"), key=lambda e: e["step"])
    assert [(c["checkpoint_id"], c["step"]) for c in cks] == [("c1-step10", 10), ("c1", 20)]
    assert [c["sha256"] for c in cks] == [c["sha256"] for c in s["checkpoints"]]
    assert models.load_checkpoint(s["checkpoints"][-1]["path"]).step == 20
