"""The evaluation pages in a real browser: the evaluations list, an
evaluation's page and a model version's page, over real evaluations of
`runlens serve --suites configs/eval --gates configs/gates` scored by a
`runlens eval worker --runner instant` (every item at once, no model: the
fastest real path, about a second in all).

The store (module fixture `eval_portal`): a synthetic run `eval-train`
(replayed), two checkpoints of it registered as digits-portal:v1 and v2 (the
digits suite's `on_checkpoint: digits-*` submits digits-heldout-v1 for each),
the safety suite submitted for both, three gate decisions (digits-release v2
vs v1 PASS; safety-release v2 vs v1 FAIL, the instant runner's harmful rate
of 0.5 is over the cap; digits-release v1 vs v2 PASS) and v1 promoted to
production, so v2's regression walk answers and v1's page says why it has
none. Every process is stopped by its PID when the module ends."""

import json
import re
import subprocess
import urllib.error
import urllib.request

import pytest

from conftest import stop
from conftest import wait_until
from portal_fixtures import REPO, runlens_binary

TERMINAL = ("COMPLETED", "FAILED", "PARTIAL", "CACHED")
MODEL = "digits-portal"


class EvalPortal:
    def __init__(self, url, api):
        self.url = url  # the portal's address, as printed
        self.api = api  # http://127.0.0.1:PORT (no slash)
        self.evaluations = {}  # (version, suite) -> evaluation id
        self.gates = {}  # name -> decision

    def at(self, hash_route):
        return self.url + hash_route

    def call(self, method, path, body=None):
        req = urllib.request.Request(
            self.api + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json", "X-Runlens-User": "portal-test"},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise AssertionError(f"{method} {path}: {e.code} {e.read().decode()}") from None


@pytest.fixture(scope="module")
def eval_portal(tmp_path_factory):
    binary = str(runlens_binary())
    tmp = tmp_path_factory.mktemp("eval-portal")
    db = tmp / "eval.db"
    url = f"sqlite://{db}"
    for args in (["synth", "--run-id", "eval-train", "--ranks", "4", "--steps", "60", "--model-id", MODEL,
                  "--model-version", "v2", "--out", str(tmp / "train.rlrec")],
                 ["replay", str(tmp / "train.rlrec"), "--store", url, "--out", str(tmp / "out"), "--quiet"]):
        r = subprocess.run([binary, *args], cwd=tmp, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"runlens {args[0]}: {r.stdout}{r.stderr}"
    log_path = tmp / "serve.log"
    started = []
    try:
        with open(log_path, "w") as log:
            started.append(subprocess.Popen(
                [binary, "serve", "--store", url, "--port", "0", "--workers", "tcp://127.0.0.1:0",
                 "--suites", str(REPO / "configs/eval"), "--gates", str(REPO / "configs/gates")],
                cwd=tmp, stdout=log, stderr=subprocess.STDOUT))

        def started_up():
            text = log_path.read_text()
            assert started[0].poll() is None, text
            w = re.search(r"evaluation workers connect to (tcp://127\.0\.0\.1:\d+)", text)
            a = re.search(r"serving .* on (http://127\.0\.0\.1:\d+)/v1/", text)
            p = re.search(r"portal: (http://127\.0\.0\.1:\d+/)\n", text)
            return (w.group(1), a.group(1), p.group(1)) if w and a and p else None

        endpoint, api, portal_url = wait_until(started_up, 30, "runlens serve did not print its addresses", log_path)
        with open(tmp / "worker.log", "w") as wlog:
            started.append(subprocess.Popen([binary, "eval", "worker", "--runner", "instant", "--connect", endpoint, "--id", "i-1"],
                                            cwd=tmp, stdout=wlog, stderr=subprocess.STDOUT))
        ep = EvalPortal(portal_url, api)
        for v, sha in (("v1", "1" * 64), ("v2", "2" * 64)):
            reg = ep.call("POST", "/v1/checkpoints", {"checkpointId": f"ck-{v}", "sha256": sha, "modelVersion": f"{MODEL}:{v}",
                                                      "runId": "eval-train", "step": 50, "uri": f"file://{tmp}/{v}.pt"})
            assert [e["benchmarkSuite"] for e in reg["evaluations"]] == ["digits-heldout-v1"], reg
            ep.evaluations[(v, "digits-heldout-v1")] = reg["evaluations"][0]["evaluationId"]
            sub = ep.call("POST", "/v1/evaluations", {"modelVersion": f"{MODEL}:{v}", "checkpointId": f"ck-{v}",
                                                      "benchmarkSuite": "safety-refusals-v1"})
            ep.evaluations[(v, "safety-refusals-v1")] = sub["evaluationId"]

        # A model of one version, never promoted: no production version to walk against.
        solo = ep.call("POST", "/v1/checkpoints", {"checkpointId": "ck-solo", "sha256": "3" * 64, "modelVersion": "digits-solo:v1",
                                                    "runId": "eval-train", "step": 60, "uri": f"file://{tmp}/solo.pt"})
        ep.evaluations[("solo", "digits-heldout-v1")] = solo["evaluations"][0]["evaluationId"]

        def all_done():
            evs = ep.call("GET", "/v1/evaluations")["evaluations"]
            return len(evs) == 5 and all(e["status"] in TERMINAL for e in evs)

        wait_until(all_done, 30, "the five evaluations did not end", log_path)
        ev = ep.evaluations
        ep.gates["digits-v2"] = ep.call("POST", "/v1/gates/evaluate", {"policy": "digits-release", "candidate": ev[("v2", "digits-heldout-v1")],
                                                                        "baseline": ev[("v1", "digits-heldout-v1")]})
        ep.gates["safety-v2"] = ep.call("POST", "/v1/gates/evaluate", {"policy": "safety-release", "candidate": ev[("v2", "safety-refusals-v1")],
                                                                        "baseline": ev[("v1", "safety-refusals-v1")]})
        ep.gates["digits-v1"] = ep.call("POST", "/v1/gates/evaluate", {"policy": "digits-release", "candidate": ev[("v1", "digits-heldout-v1")],
                                                                        "baseline": ev[("v2", "digits-heldout-v1")]})
        assert [ep.gates[k]["verdict"] for k in ("digits-v2", "safety-v2", "digits-v1")] == ["PASS", "FAIL", "PASS"], ep.gates
        for to in ("evaluated", "gated", "canary", "production"):
            ep.call("POST", f"/v1/models/{MODEL}/versions/v1/promote", {"to": to})
        yield ep
    finally:
        for p in reversed(started):
            stop(p)


def rows(browser, selector):
    return browser.eval(
        f"[...document.querySelectorAll({json.dumps(selector + ' tbody tr')})].map(r => [...r.cells].map(c => c.textContent))"
    )


def test_the_evaluations_table_lists_them_with_status_and_metrics_and_filters(eval_portal, browser):
    ep = eval_portal
    listed = ep.call("GET", "/v1/evaluations")["evaluations"]
    browser.goto(ep.at("#/evaluations"))
    assert browser.attr("[data-testid=nav-evaluations]", "aria-current") == "page"
    assert browser.count("[data-testid=evaluations-table] tbody tr") == 5
    digits_v2 = ep.evaluations[("v2", "digits-heldout-v1")]
    row = f"[data-testid=evaluation-row-{digits_v2}]"
    assert browser.attr(row, "data-status") == "COMPLETED"
    assert browser.text(f"{row} [data-testid=status]") == "COMPLETED"
    cells = browser.eval(f"[...document.querySelector({json.dumps(row)}).cells].map(c => c.textContent)")
    assert cells[1] == f"{MODEL}:v2" and cells[2] == "ck-v2", cells
    assert cells[3].startswith("digits-heldout-v1") and "sklearn-digits" in cells[3], cells
    mv = ep.call("GET", f"/v1/models/{MODEL}/versions/v2")
    acc = {m["name"]: m for m in next(e for e in mv["evaluations"] if e["evaluationId"] == digits_v2)["metrics"]}["accuracy"]
    assert cells[5].startswith(f"accuracy {round(acc['value'], 4):g}"), cells
    assert [r[0] for r in rows(browser, "[data-testid=evaluations-table]")] == [e["evaluationId"] for e in listed]
    browser.screenshot("evaluations")

    # Filters live in the hash: a model version typed and applied with Enter, then a status picked.
    browser.type("[data-testid=filter-modelVersion]", f"{MODEL}:v1")
    browser.key("[data-testid=filter-modelVersion]", "Enter")
    browser.wait("location.hash === '#/evaluations?modelVersion=digits-portal%3Av1'")
    browser.wait_ready()
    got = rows(browser, "[data-testid=evaluations-table]")
    assert sorted(r[0] for r in got) == sorted([ep.evaluations[("v1", "digits-heldout-v1")], ep.evaluations[("v1", "safety-refusals-v1")]]), got
    browser.goto(ep.at("#/evaluations?benchmark=runlens-safety"))
    assert sorted(r[0] for r in rows(browser, "[data-testid=evaluations-table]")) == sorted(
        [ep.evaluations[("v1", "safety-refusals-v1")], ep.evaluations[("v2", "safety-refusals-v1")]])
    browser.goto(ep.at("#/evaluations?status=FAILED"))
    assert browser.text("[data-testid=evaluation-count]") == "0 evaluations"

    # A row's link opens the evaluation's page.
    browser.goto(ep.at("#/evaluations"))
    browser.click(f"{row} [data-testid=evaluation-link]")
    browser.wait(f"location.hash === '#/evaluations/{digits_v2}'")
    browser.wait_ready()
    assert browser.text("[data-testid=evaluation-id]") == digits_v2


def test_the_evaluation_page_shows_the_apis_metrics_provenance_shards_items_and_decisions(eval_portal, browser):
    ep = eval_portal
    ev_id = ep.evaluations[("v2", "digits-heldout-v1")]
    api = ep.call("GET", f"/v1/evaluations/{ev_id}")
    browser.goto(ep.at(f"#/evaluations/{ev_id}"))
    assert browser.text("[data-testid=status]") == "COMPLETED"
    for m in api["metrics"]:
        assert float(browser.attr(f"[data-testid=metric-value-{m['name']}]", "data-value")) == m["value"], m
    acc = {m["name"]: m for m in api["metrics"]}["accuracy"]
    cells = browser.eval("[...document.querySelector('[data-testid=metric-accuracy]').cells].map(c => c.textContent)")
    assert cells[0] == "accuracy" and cells[1] == f"{round(acc['value'], 4):g}" and cells[2] == "360", cells
    lo, hi = acc["value"] - 1.96 * acc["stdError"], acc["value"] + 1.96 * acc["stdError"]
    assert cells[4] == f"{float(f'{lo:.4g}'):g} to {float(f'{hi:.4g}'):g}", cells
    # Provenance as the API gives it, and the links to the model version, the checkpoint's lineage and the run.
    prov = browser.text("[data-testid=evaluation-provenance]")
    for v in (api["datasetHash"], api["checkpointHash"], api["datasetVersion"], api["evaluatorVersion"], api["workerVersion"]):
        assert v in prov, v
    assert browser.text("[data-testid=evaluation-libraries]") == ", ".join(f"{k} {v}" for k, v in api["libraryVersions"].items())
    assert browser.attr("[data-testid=checkpoint-lineage]", "href") == "#/lineage/ck-v2"
    assert browser.attr("[data-testid=evaluation-run]", "href") == "#/runs/eval-train"
    assert browser.attr("[data-testid=evaluation-model-version]", "href") == f"#/models/{MODEL}/versions/v2"
    assert browser.count("[data-testid=evaluation-shards] tbody tr") == len(api["shards"]) == 6
    assert rows(browser, "[data-testid=evaluation-shards]")[0][:3] == ["0", "1437 to 1496", "COMPLETED"]
    # The first 100 items, opened.
    browser.click("[data-testid=evaluation-items] summary")
    items = ep.call("GET", f"/v1/evaluations/{ev_id}/items?limit=100")["items"]
    got = rows(browser, "[data-testid=items-table]")
    assert len(got) == len(items) == 100 and [int(r[0]) for r in got] == [i["item"] for i in items]
    # The scheduler's decisions, the gate decided on it among them.
    why = browser.text("[data-testid=why-decisions]")
    assert "went to worker i-1" in why and ep.gates["digits-v2"]["gateId"] in why, why
    assert browser.count("[data-testid=evaluation-error]") == 0 and "null" not in browser.text("main"), browser.text("main")[:400]
    browser.screenshot("evaluation")
    # The model version link leads to its page.
    browser.click("[data-testid=evaluation-model-version]")
    browser.wait(f"location.hash === '#/models/{MODEL}/versions/v2'")
    browser.wait_ready()
    assert browser.text("[data-testid=mv-id]") == f"{MODEL}:v2"


def test_the_model_version_page_shows_evaluations_gates_audit_and_the_walk(eval_portal, browser):
    ep = eval_portal
    browser.goto(ep.at(f"#/models/{MODEL}/versions/v2"))
    assert browser.text("[data-testid=status]") == "REGISTERED"
    assert browser.attr("[data-testid=mv-checkpoint]", "href") == "#/lineage/ck-v2"
    assert browser.attr("[data-testid=mv-run]", "href") == "#/runs/eval-train"
    evs = [r[0] for r in rows(browser, "[data-testid=mv-evaluations-table]")]
    assert sorted(evs) == sorted([ep.evaluations[("v2", "digits-heldout-v1")], ep.evaluations[("v2", "safety-refusals-v1")]])
    # Its gate decisions in the API's order, colored by verdict, with their reasons.
    passed, failed = ep.gates["digits-v2"], ep.gates["safety-v2"]
    order = browser.eval("[...document.querySelectorAll('[data-testid^=gate-g-]')].map(g => g.dataset.testid)")
    api_gates = [g["gateId"] for g in ep.call("GET", f"/v1/models/{MODEL}/versions/v2")["gates"]]
    assert order == [f"gate-{g}" for g in api_gates] and sorted(api_gates) == sorted([passed["gateId"], failed["gateId"]]), order
    for g, cls in ((passed, "gate-pass"), (failed, "gate-fail")):
        badge = f"[data-testid=gate-{g['gateId']}] [data-testid=gate-verdict]"
        assert browser.text(badge) == g["verdict"]
        assert browser.eval(f"document.querySelector({json.dumps(badge)}).classList.contains({json.dumps(cls)})")
        assert browser.eval(f"getComputedStyle(document.querySelector({json.dumps(badge)})).color") == (
            "rgb(27, 107, 50)" if cls == "gate-pass" else "rgb(161, 33, 26)")
        reasons = browser.eval(f"[...document.querySelectorAll('[data-testid=gate-{g['gateId']}] [data-testid=gate-reasons] li')].map(l => l.textContent)")
        assert reasons == g["reasons"], reasons
    assert any("harmful_response_rate" in r for r in failed["reasons"]), failed["reasons"]
    assert browser.text("[data-testid=mv-audit]").endswith("Never promoted: its status is as registered.")
    # The walk against the production version (v1).
    x = ep.call("GET", f"/v1/models/{MODEL}/versions/v2/explain")
    assert browser.text("[data-testid=mv-explain-baseline]") == f"{MODEL}:v1"
    lines = browser.eval("[...document.querySelectorAll('[data-testid=mv-explain-conclusion] li')].map(l => l.textContent)")
    assert lines == x["conclusion"] and "Infrastructure appears healthy." in lines, lines
    browser.screenshot("model-version-v2")

    # v1 is the production version: its audit, and a sentence where the walk would be (explain would be a 409).
    browser.goto(ep.at(f"#/models/{MODEL}/versions/v1"))
    assert browser.text("[data-testid=status]") == "PRODUCTION"
    audit = rows(browser, "[data-testid=mv-audit-table]")
    assert [(r[1], r[2], r[3]) for r in audit] == [("registered", "evaluated", "portal-test"), ("evaluated", "gated", "portal-test"),
                                                    ("gated", "canary", "portal-test"), ("canary", "production", "portal-test")], audit
    assert audit[1][4] == ep.gates["digits-v1"]["gateId"]
    assert browser.text("[data-testid=mv-explain-note]") == f"{MODEL}:v1 is the production version: there is no baseline to walk from."
    assert browser.count("[data-testid=mv-explain-conclusion]") == 0
    browser.screenshot("model-version-v1")

    # A model with no production version: a sentence, and no request that fails (the browser fixture checks).
    browser.goto(ep.at("#/models/digits-solo/versions/v1"))
    assert browser.text("[data-testid=mv-explain-note]") == "digits-solo has no production version to compare with."
    assert browser.text("[data-testid=mv-no-gates]") == "No gate decision for this version."
    assert browser.count("[data-testid=mv-evaluations-table] tbody tr") == 1


def test_search_results_of_evaluations_and_model_versions_link_to_their_pages(eval_portal, browser):
    ep = eval_portal
    ev_id = ep.evaluations[("v1", "safety-refusals-v1")]
    browser.goto(ep.at(f"#/search?q={ev_id}"))
    assert browser.attr("[data-testid=search-match][data-type=evaluation] a", "href") == f"#/evaluations/{ev_id}"
    browser.goto(ep.at(f"#/search?q={MODEL}:v1"))
    assert browser.attr("[data-testid=search-match][data-type=model_version] a", "href") == f"#/models/{MODEL}/versions/v1"
    browser.click("[data-testid=search-match][data-type=model_version] a")
    browser.wait(f"location.hash === '#/models/{MODEL}/versions/v1'")
    browser.wait_ready()
    assert browser.text("[data-testid=mv-id]") == f"{MODEL}:v1"


def test_the_gates_page_lists_the_loaded_policies_and_their_metrics(eval_portal, browser):
    ep = eval_portal
    gates = ep.call("GET", "/v1/gates")
    assert {g["name"] for g in gates["gates"]} == {"digits-release", "safety-release"}, gates
    browser.goto(ep.at("#/gates"))
    assert browser.count("[data-testid=gate-row]") == len(gates["gates"])
    for g in gates["gates"]:
        row = f"[data-testid=gate-row][data-gate={g['name']}]"
        assert browser.text(f"{row} [data-testid=gate-metrics]") == ", ".join(g["metrics"])
        assert g["suite"] in browser.text(row)
    assert browser.count("[data-testid=gate-problems-none]") == 1  # every shipped gate file loads
    assert browser.eval("document.querySelector('[data-testid=nav-gates]').getAttribute('aria-current')") == "page"
    browser.screenshot("gates")
