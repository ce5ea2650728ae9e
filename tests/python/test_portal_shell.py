"""The portal's shell in a real browser: `runlens serve` prints its URL and
serves it from the binary (index, assets with MIME types and ETags, 404 JSON
for an unknown asset); the default route lists the runs; the navigation, the
run tab bar and the search box route by the hash."""

import json
import urllib.error
import urllib.request


def fetch(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_the_portal_is_served_from_the_binary(portal):
    status, headers, body = fetch(portal.url)
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert b'<script type="module" src="/portal/app.js">' in body
    status, headers, body = fetch(portal.url + "portal/app.js")
    assert status == 200
    assert headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert headers["Cache-Control"] == "no-cache"
    etag = headers["ETag"]
    assert etag.startswith('"') and len(etag) == 18
    assert b"export function timeSeries" in body
    status, headers, body = fetch(portal.url + "portal/app.js", {"If-None-Match": etag})
    assert status == 304 and body == b""
    status, headers, _ = fetch(portal.url + "portal/vendor/uplot/uPlot.min.css")
    assert status == 200 and headers["Content-Type"] == "text/css; charset=utf-8"
    status, headers, _ = fetch(portal.url + "portal/favicon.svg")
    assert status == 200 and headers["Content-Type"] == "image/svg+xml"
    status, headers, body = fetch(portal.url + "portal/nope.js")
    assert status == 404 and headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"error": "no such portal asset: nope.js", "status": 404}


def test_the_default_route_lists_every_run(portal, browser):
    browser.goto(portal.url)
    assert browser.hash() == "#/runs"
    browser.wait(f"document.querySelectorAll('[data-testid=run-row]').length === {len(portal.store.runs)}")
    rows = browser.eval("[...document.querySelectorAll('[data-testid=run-row]')].map(r => r.dataset.run).sort()")
    assert rows == sorted(portal.store.runs)
    assert browser.attr("[data-testid=nav-runs]", "aria-current") == "page"
    assert browser.eval("typeof window.uPlot") == "function"
    browser.screenshot("shell-runs")


def test_sorting_and_filtering_go_through_the_hash(portal, browser):
    browser.goto(portal.at("#/runs"))
    browser.click("[data-testid=sort-step]")
    browser.wait("location.hash === '#/runs?sort=step&dir=asc'")
    browser.wait("document.querySelector('[data-testid=sort-step]').getAttribute('aria-pressed') === 'true'")
    steps = browser.eval("[...document.querySelectorAll('[data-testid=run-row] td:nth-child(6)')].map(t => t.textContent)")
    assert steps == ["60", "120", "120", "300", "300"]
    browser.eval("(() => { const s = document.querySelector('[data-testid=filter-status]'); s.value = 'failed'; s.dispatchEvent(new Event('change')); })()")
    browser.wait("location.hash.includes('status=failed')")
    browser.wait_ready()
    browser.wait("document.querySelectorAll('[data-testid=run-row]').length === 1")
    assert browser.attr("[data-testid=run-row]", "data-run") == "lr-nan"
    assert browser.eval("document.querySelector('[data-testid=run-row]').classList.contains('failed')")


def test_the_runs_table_shows_the_latest_metrics_and_links_each_run(portal, browser):
    browser.goto(portal.at("#/runs?sort=runId&dir=asc"))
    cells = browser.eval(
        "Object.fromEntries([...document.querySelectorAll('[data-testid=run-row]')].map(r => [r.dataset.run, [...r.cells].map(c => c.textContent)]))"
    )
    # Run, Status, Model, Experiment, GPUs, Step, Loss, MFU, Tokens/s, Open incidents, Started
    assert cells["lr-nan"][:7] == ["lr-nan", "FAILED", "llama-x-7b v8", "exp-pretrain", "64", "300", "NaN"]
    assert cells["wide-1024"][2:6] == ["llama-x-70b v1", "exp-scale", "1,024", "60"]
    assert cells["thermal-13"][7].endswith(" %") and cells["thermal-13"][8].endswith(" k")
    assert browser.eval("document.querySelector('[data-run=lr-nan]').classList.contains('failed')")
    assert browser.count("tr.failed") == 1
    browser.screenshot("runs")
    browser.click("[data-run='lr-nan'] [data-testid=run-link]")
    browser.wait("location.hash === '#/runs/lr-nan'")
    browser.wait_ready()
    assert browser.text("[data-testid=run-id]") == "lr-nan"
    browser.wait("!!document.querySelector('#run-tabs [data-testid=status]')")
    assert browser.text("#run-tabs [data-testid=status]") == "FAILED"
    assert [browser.text(f"[data-testid=tab-{t}]") for t in ("run", "failure", "timeline")] == ["Run", "Failure", "Timeline"]


def test_the_search_box_finds_a_job_and_a_run(portal, browser):
    browser.goto(portal.at("#/runs"))
    browser.type("[data-testid=search-input]", "job-4821")
    browser.key(None, "Enter")
    browser.wait("location.hash === '#/search?q=job-4821'")
    browser.wait_ready()
    browser.wait("document.querySelectorAll('[data-testid=search-match]').length >= 1")
    match = browser.eval("[...document.querySelectorAll('[data-testid=search-match]')].map(r => [r.dataset.type, r.cells[2].textContent])")
    assert ["job", "thermal-13"] in match, match
    browser.screenshot("search-job")
    # An exact run id opens the run.
    browser.goto(portal.at("#/search?q=cmp-b"))
    browser.wait("location.hash === '#/runs/cmp-b'")
    browser.wait_ready()
    assert browser.text("[data-testid=run-id]") == "cmp-b"


def test_the_keyboard_reaches_every_nav_link_with_a_visible_focus(portal, browser):
    browser.goto(portal.at("#/runs/thermal-13"))
    browser.focus("#nav a:last-child")
    browser.key(None, "Tab")
    # From the last nav link: the search input, outlined.
    assert browser.eval("document.activeElement.dataset.testid") == "search-input"
    assert browser.eval("document.activeElement.matches(':focus-visible')")
    style = browser.eval("(() => { const s = getComputedStyle(document.activeElement); return [s.outlineStyle, s.outlineWidth]; })()")
    assert style == ["solid", "3px"]
    browser.focus("[data-testid=tab-failure]")
    browser.key(None, "Enter")
    browser.wait("location.hash === '#/runs/thermal-13/failure'")
    browser.wait_ready()
