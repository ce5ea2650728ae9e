"""The Run page in a real browser: progress, throughput, the step timing
breakdown, the GPU summary and the synced plots with the run's alerts marked;
the NaN step on the loss plot; zoom by a real mouse drag."""


def test_the_nan_step_is_marked_on_the_loss_plot(portal, browser):
    browser.goto(portal.at("#/runs/lr-nan"))
    browser.wait("document.body.dataset.state === 'ready'")
    loss = "[data-testid=chart-loss]"
    browser.wait(f"document.querySelector('{loss} [data-testid=marker-180]')")
    label = browser.eval(f"document.querySelector('{loss} [data-testid=marker-180]').textContent")
    assert label == "nan loss"
    assert not browser.eval(f"document.querySelector('{loss} [data-testid=marker-180]').hidden")
    # The lr change's symptoms at 170 are marked too, and the text alternative says so.
    assert browser.count(f"{loss} [data-testid=marker-170]") == 1
    aria = browser.attr(loss, "aria-label")
    assert aria.startswith("Loss: steps 1 to 300;"), aria
    assert "nan loss at step 180" in aria
    # The numbers are a click away: the table shows NaN at step 180.
    browser.click(f"{loss} details.numbers summary")
    browser.wait(f"document.querySelector('{loss} details.numbers').open")
    row = browser.wait(f"[...document.querySelectorAll('{loss} details.numbers tbody tr')].map(r => [...r.cells].map(c => c.textContent)).find(c => c[0] === '180')")
    assert row == ["180", "NaN"]
    for chart in ("loss", "gradient-norm", "learning-rate", "step-time"):
        assert browser.eval(f"!!document.querySelector('[data-testid=chart-{chart}] canvas')"), chart
    assert browser.count("[data-testid=chart-validation-loss]") == 1
    assert browser.text("[data-testid=progress-status]") == "Status\nFAILED\nloss is NaN"
    assert browser.text("[data-testid=progress-step]").startswith("Step\n300")
    assert browser.text("[data-testid=throughput-per-gpu]").splitlines()[2] == "64 GPUs"
    assert "MFU" in browser.text("[data-testid=throughput-mfu]")
    # The ranks report forward, backward, optimizer, communication and data (breakdownMs).
    parts = browser.eval("[...document.querySelectorAll('[data-testid=breakdown] tr[data-part]')].map(r => r.dataset.part)")
    assert parts == ["forward", "backward", "optimizer", "comm", "dataWait"]
    assert browser.text("[data-testid=breakdown] p.muted").startswith("reported by the ranks")
    assert browser.count("[data-testid=gpu-row]") == 64
    browser.screenshot("run-lr-nan")


def test_a_mouse_drag_zooms_to_a_step_range(portal, browser):
    browser.goto(portal.at("#/runs/thermal-13"))
    plot = "[data-testid=chart-step-time] .u-over"
    browser.wait(f"document.querySelector('{plot}')")
    assert browser.attr("[data-testid=plot-range]", "data-from") == "1"
    browser.drag(plot, (0.25, 0.5), (0.6, 0.5))
    browser.wait("/[?&]from=\\d+&to=\\d+/.test(location.hash)")
    browser.wait_ready()
    q = browser.eval("Object.fromEntries(new URLSearchParams(location.hash.split('?')[1]))")
    lo, hi = int(q["from"]), int(q["to"])
    # 25 % to 60 % of steps 1..300, within a few steps of rounding.
    assert 60 < lo < 90 and 170 < hi < 195, q
    browser.wait(f"document.querySelector('[data-testid=plot-range]').dataset.from === '{lo}'")
    assert browser.attr("[data-testid=plot-range]", "data-to") == str(hi)
    # The straggler's alerts at 102 and 106 are inside the range and marked.
    assert browser.count("[data-testid=chart-step-time] [data-testid=marker-102]") == 1
    # Every plot of the page shows the range.
    n = browser.eval(f"[...document.querySelectorAll('[data-testid=numbers]')].length")
    assert n == 4
    browser.screenshot("run-thermal-13-zoomed")
    browser.click("[data-testid=zoom-reset]")
    browser.wait("location.hash === '#/runs/thermal-13'")
    browser.wait("document.querySelector('[data-testid=plot-range]') && document.querySelector('[data-testid=plot-range]').dataset.from === '1'")
