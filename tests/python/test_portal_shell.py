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
