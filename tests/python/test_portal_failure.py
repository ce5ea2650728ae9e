"""The Failure page in a real browser: the content of `runlens report` as a
page, with the likely cause of each canonical chain."""


def test_the_lr_nan_run_blames_the_learning_rate_change(portal, browser):
    browser.goto(portal.at("#/runs/lr-nan/failure"))
    assert browser.text("[data-testid=failure-title]") == "NaN loss detected at step 180"
    assert browser.attr("[data-testid=cause]", "data-cause") == "config_change"
    assert browser.text("[data-testid=cause]") == "Config change"
    assert browser.text("[data-testid=owner]") == "training"
    cause = browser.text("[data-testid=report-cause]")
    assert "after the learning rate changed" in cause
    assert browser.eval("[...document.querySelectorAll('[data-testid=evidence] li')].some(li => li.dataset.kind === 'grad_spike')")
    events = browser.text("[data-testid=report-events]")
    assert "learning rate changed 0.00014 -> 0.0014 (9.9x)" in events
    assert "resume from the last checkpoint before step 170" in browser.text("[data-testid=report-recommendation]")
    training = browser.text("[data-testid=report-training]")
    assert training.startswith("Training (steps 169 to 180)")
    assert "NaN" in training and "Infinity" in training
    assert browser.attr("[data-testid=tab-failure]", "aria-current") == "page"
    browser.screenshot("failure-lr-nan")


def test_the_thermal_run_blames_the_throttled_gpu(portal, browser):
    browser.goto(portal.at("#/runs/thermal-13/failure"))
    assert browser.attr("[data-testid=cause]", "data-cause") == "hardware_throttle"
    assert browser.text("[data-testid=owner]") == "infrastructure"
    assert "rank 13 (node gpu-node-1, GPU 5) is thermally throttled" in browser.text("[data-testid=report-cause]")
    assert "rank 13 (gpu-node-1 GPU 5) 2.04x" in browser.text("[data-testid=report-infrastructure]")
    # An evidence step links to the timeline around it.
    browser.click("[data-testid=evidence] li a")
    browser.wait("location.hash.startsWith('#/runs/thermal-13/timeline?from=')")
    browser.wait_ready()
    browser.screenshot("failure-thermal-13-evidence-timeline")
