"""The Ranks, Compare and Lineage pages in a real browser (portal_fixtures.py's
store: thermal-13, lr-nan, cmp-a, cmp-b, wide-1024): the thermal rank
highlighted on the heatmap and its drill-down to node, GPU, temperature and
clock; the 1024-rank heatmap within its cell budget; the changed config keys
of two runs; the lineage graph and its re-centring on a node."""

import json
import urllib.request


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        body = r.read()
        return json.loads(body), len(body)


def table_rows(browser, selector):
    """The cells of a table's body rows, as text."""
    return browser.eval(
        f"[...document.querySelectorAll({json.dumps(selector + ' tbody tr')})].map(r => [...r.cells].map(c => c.textContent))"
    )


def test_ranks_highlights_the_thermal_rank_and_drills_down_to_its_gpu(portal, browser):
    browser.goto(portal.at("#/runs/thermal-13/ranks"))
    browser.wait("document.querySelector('[data-testid=heatmap-highlight-13]') !== null")
    assert browser.count("[data-testid^=heatmap-highlight-]") == 1
    # 64 ranks: one row each; the failure window's steps at full resolution, said on the page.
    assert browser.eval("document.querySelector('[data-testid=heatmap]').getAttribute('aria-label')").startswith(
        "Heatmap of 64 rank rows by "
    )
    resolution = browser.text("[data-testid=heatmap-resolution]")
    assert "rank-window column" in resolution and "full-resolution step column" in resolution, resolution
    assert "inside the failure window" in resolution, resolution
    legend = browser.text("[data-testid=heatmap-legend]")
    assert "1×" in legend and "2×" in legend and "no data" in legend, legend
    # Hovering the map names the cell's rank, steps and value.
    browser.hover("[data-testid=heatmap-canvas]", at=(0.95, 0.5))
    browser.wait("/^rank \\d+, steps? \\d+/.test(document.querySelector('[data-testid=heatmap-hover]').textContent)")
    # The rank table, by work time over the median: rank 13 first, marked.
    first = table_rows(browser, "[data-testid=rank-table]")[0]
    assert first[0] == "13" and first[1] == "gpu-node-1" and first[2] == "5", first
    assert browser.eval("document.querySelector('[data-testid=rank-row-13]').classList.contains('incident')")
    # Sorting: by rank with the mouse, by node from the keyboard.
    browser.click("[data-testid=sort-rank]")
    browser.wait("document.querySelector('[data-testid=rank-table] tbody tr').cells[0].textContent === '0'")
    assert browser.attr("[data-testid=sort-rank]", "data-testid") == "sort-rank"
    assert browser.eval("document.querySelector('[data-testid=sort-rank]').closest('th').getAttribute('aria-sort')") == "ascending"
    browser.key("[data-testid=sort-node]", "Enter")
    browser.wait("document.querySelector('[data-testid=sort-node]').closest('th').getAttribute('aria-sort') === 'ascending'")
    nodes = [r[1] for r in table_rows(browser, "[data-testid=rank-table]")]
    assert nodes == sorted(nodes) and nodes[0] == "gpu-node-0", nodes[:3]
    browser.screenshot("ranks-thermal-13")

    # A real mouse click on rank 13's row (its node cell, not the link) opens the drill-down.
    browser.click("[data-testid=rank-row-13] td:nth-child(2)")
    browser.wait("location.hash === '#/runs/thermal-13/ranks?rank=13'")
    browser.wait_ready()
    browser.wait("document.querySelector('[data-testid=drill-node]') !== null")
    assert browser.text("[data-testid=drill-rank]") == "rank 13"
    assert browser.text("[data-testid=drill-node]") == "node gpu-node-1"
    assert browser.text("[data-testid=drill-gpu]") == "GPU 5"
    chain = browser.text("[data-testid=drill-chain]")
    assert "°C ↑" in chain and "MHz ↓" in chain and "thermal" in chain, chain
    assert "diagnosis" in browser.text("[data-testid=drill-incidents]") or "straggler" in browser.text("[data-testid=drill-incidents]")
    for title in ("temperature", "sm-clock", "power", "throttle-reasons"):
        assert browser.count(f"[data-testid^=chart-gpu-5-{title}]") == 1, title
    browser.click("[data-testid=drill-gpu-numbers] summary")
    browser.wait("document.querySelectorAll('[data-testid=drill-gpu-numbers] tbody tr').length > 0")
    header = browser.eval("[...document.querySelectorAll('[data-testid=drill-gpu-numbers] thead th')].map(t => t.textContent)")
    temp, clock, throttle = header.index("temp °C"), header.index("SM clock MHz"), header.index("throttle")
    rows = table_rows(browser, "[data-testid=drill-gpu-numbers]")
    number = lambda s: float(s.replace(",", "")) if s not in ("—", "") else None  # noqa: E731
    hot = [r for r in rows if number(r[temp]) is not None and number(r[temp]) > 85]
    slow = [r for r in hot if number(r[clock]) is not None and number(r[clock]) < 1500]
    assert slow, f"no sample above 85 °C with the clock below 1500 MHz in {rows[:20]}"
    assert "thermal" in slow[0][throttle], slow[0]
    browser.screenshot("ranks-thermal-13-drill")

    # Clicking the heatmap's highlighted row goes to the same drill-down.
    browser.goto(portal.at("#/runs/thermal-13/ranks"))
    browser.click("[data-testid=heatmap-highlight-13]")
    browser.wait("location.hash === '#/runs/thermal-13/ranks?rank=13'")


def test_the_1024_rank_heatmap_ships_at_most_max_ranks_by_max_steps_cells(portal, browser):
    browser.goto(portal.at("#/runs/wide-1024/ranks"))
    browser.wait("document.querySelector('[data-testid=heatmap-highlight-700]') !== null")
    # What the page fetched: one heatmap of at most 256 x 400 cells, a few hundred KiB at most.
    fetched = browser.eval(
        "performance.getEntriesByType('resource').filter(e => e.name.includes('/runs/wide-1024/heatmap?'))"
        ".map(e => ({url: e.name, bytes: e.decodedBodySize, wire: e.encodedBodySize}))"
    )
    assert len(fetched) == 1, fetched
    assert "maxRanks=256" in fetched[0]["url"] and "maxSteps=400" in fetched[0]["url"], fetched
    hm, size = get_json(fetched[0]["url"])
    assert fetched[0]["bytes"] == size and fetched[0]["wire"] <= size  # (gzip on the wire)
    assert len(hm["rows"]) <= 256 and len(hm["columns"]) <= 400
    assert len(hm["cells"]) == len(hm["rows"]) and all(len(r) == len(hm["columns"]) for r in hm["cells"])
    assert hm["rankBucket"] == 4 and len(hm["rows"]) == 256
    assert size < 256 * 400 * 8, size  # never 1024 x 60 rank-steps of full rows
    label = browser.eval("document.querySelector('[data-testid=heatmap]').getAttribute('aria-label')")
    assert label.startswith(f"Heatmap of 256 rank rows by {len(hm['columns'])} step columns"), label
    assert label.endswith("incidents on rank 700 (straggler)"), label
    # The table lists every rank, 100 at a time.
    assert browser.count("[data-testid=rank-table] tbody tr") == 100
    browser.click("[data-testid=ranks-show-all]")
    browser.wait("document.querySelectorAll('[data-testid=rank-table] tbody tr').length === 1024")
    assert table_rows(browser, "[data-testid=rank-table]")[0][0] == "700"
    browser.screenshot("ranks-wide-1024")


def test_compare_marks_the_changed_config_keys(portal, browser):
    browser.goto(portal.at("#/compare"))
    browser.type("#compare-left", "cmp-a")
    browser.type("#compare-right", "cmp-b")
    browser.click("[data-testid=compare-form] button[type=submit]")
    browser.wait("location.hash === '#/compare?left=cmp-a&right=cmp-b'")
    browser.wait("document.querySelector('[data-testid=conclusion]') !== null && document.body.dataset.state === 'ready'")
    for key in ("lr", "warmup_steps"):
        sel = f'[data-testid="changed-config.{key}"]'
        assert browser.count(sel) == 1, key
        assert browser.eval(f"document.querySelector({json.dumps(sel)}).classList.contains('changed')")
    lr = browser.text('[data-testid="changed-config.lr"]')
    assert "0.0003" in lr and "0.0006" in lr and "changed" in lr, lr
    assert browser.count('[data-testid="same-dataset"]') == 1
    assert browser.count('[data-testid="changed-dataset"]') == 0
    assert "config.lr" in browser.text("[data-testid=changed-keys]")
    conclusion = browser.text("[data-testid=conclusion]")
    assert "Training configuration changed: lr, warmup_steps." in conclusion, conclusion
    verdict = browser.eval("document.querySelector('[data-testid=verdict-stepTimeMs]').className")
    assert verdict.startswith("verdict verdict-"), verdict
    # The two runs' loss and step time overlaid on one step axis.
    assert browser.count("[data-testid=chart-loss]") == 1
    assert browser.count("[data-testid=chart-step-time-ms]") == 1
    assert "cmp-a loss last" in browser.attr("[data-testid=chart-loss]", "aria-label")
    assert "cmp-b loss last" in browser.attr("[data-testid=chart-loss]", "aria-label")
    browser.screenshot("compare-cmp-a-cmp-b")


def test_lineage_draws_the_run_graph_and_recentres_on_a_node(portal, browser):
    browser.goto(portal.at("#/lineage/thermal-13"))
    browser.wait("document.querySelector('[data-testid=lineage-graph]') !== null")
    assert browser.text("[data-testid=lineage-centre]") == "thermal-13"
    for node in ("experiment-exp-pretrain", "job-job-4821", "dataset_version-v42", "node-gpu-node-0", "gpu-gpu-node-0/0", "rank-0"):
        assert browser.count(f'[data-testid="lineage-node-{node}"]') == 1, node
    # Laid out left to right: experiment, run, dataset, node, GPU, rank.
    xs = browser.eval(
        "['experiment-exp-pretrain', 'training_run-thermal-13', 'dataset_version-v42', 'node-gpu-node-0', 'gpu-gpu-node-0/0', 'rank-0']"
        ".map(k => document.querySelector(`[data-testid=\"lineage-node-${k}\"]`).getBoundingClientRect().left)"
    )
    assert xs == sorted(xs) and len(set(xs[2:])) == 4, xs
    # A GPU leads to its rank's drill-down.
    assert browser.attr('[data-testid="lineage-node-gpu-gpu-node-0/0"]', "href") == "#/runs/thermal-13/ranks?rank=0"
    # Checkpoints beyond the first few are one keyboard-operable "+N more".
    shown = browser.count("[data-testid^=lineage-node-checkpoint-]")
    browser.key("[data-testid=lineage-more-checkpoint]", "Enter")
    browser.wait(f"document.querySelectorAll('[data-testid^=lineage-node-checkpoint-]').length > {shown}")
    # The text alternative lists the same entities.
    browser.click("[data-testid=lineage-list] summary")
    browser.wait("document.querySelector('[data-testid=lineage-list] ul') !== null")
    listing = browser.text("[data-testid=lineage-list]")
    assert "exp-pretrain" in listing and "gpu-node-1/5" in listing and "v42" in listing
    browser.screenshot("lineage-thermal-13")

    # Clicking a node re-centres the graph on it.
    browser.click('[data-testid="lineage-node-node-gpu-node-1"]')
    browser.wait("location.hash === '#/lineage/gpu-node-1'")
    browser.wait_ready()
    browser.wait("document.querySelector('[data-testid=lineage-centre]') && document.querySelector('[data-testid=lineage-centre]').textContent === 'gpu-node-1'")
    assert browser.count("[data-testid=lineage-node]") == 1
    assert browser.count('[data-testid="lineage-node-gpu-gpu-node-1/5"]') == 1
    assert browser.count('[data-testid="lineage-node-training_run-thermal-13"]') == 1
    browser.screenshot("lineage-gpu-node-1")


def test_keep_alive_answers_do_not_wait_for_a_delayed_ack(portal):
    # serve sets TCP_NODELAY: without it, a small answer on a kept-alive connection
    # (headers and body written apart) waits ~40 ms for the client's delayed ACK.
    import http.client
    import statistics
    import time
    import urllib.parse

    u = urllib.parse.urlparse(portal.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            conn.request("GET", "/v1/runs/thermal-13")
            r = conn.getresponse()
            body = r.read()
            times.append((time.perf_counter() - t0) * 1000)
            assert r.status == 200 and json.loads(body)["runId"] == "thermal-13"
    finally:
        conn.close()
    assert statistics.median(times) < 20, times
