"""The Timeline page in a real browser: the straggler and its diagnosis
between steps 90 and 120, linking to rank 13's page and its GPU's lineage."""


def test_the_straggler_and_its_diagnosis_appear_with_a_link_to_its_rank(portal, browser):
    browser.goto(portal.at("#/runs/thermal-13/timeline?from=90&to=120"))
    summary = browser.text("[data-testid=timeline-summary]")
    assert summary == "8 events in steps 90 to 120: 5 alerts, 2 diagnoses.", summary
    kinds = browser.eval("[...document.querySelectorAll('[data-testid=timeline-event]')].map(e => [e.dataset.step, e.dataset.kind, e.dataset.alertKind, e.dataset.rank])")
    assert ["102", "alert", "straggler", "13"] in kinds
    assert ["102", "diagnosis", "diagnosis", "13"] in kinds
    assert all(90 <= int(s) <= 120 for s, *_ in kinds if s)
    diagnosis = "[data-testid=timeline-event][data-kind=diagnosis]"
    assert "LIKELY CAUSE: hardware_throttle (owner infrastructure)" in browser.text(diagnosis)
    assert browser.eval(f"document.querySelector('{diagnosis} .badge').textContent") == "info"
    straggler = "[data-testid=timeline-event][data-alert-kind=straggler]"
    assert browser.eval(f"document.querySelector('{straggler} .badge').textContent") == "warning"
    assert browser.attr(f"{straggler} [data-testid=gpu-link]", "href") == "#/lineage/gpu-node-1%2F5"
    browser.screenshot("timeline-thermal-13")
    browser.click(f"{straggler} [data-testid=rank-link]")
    browser.wait("location.hash === '#/runs/thermal-13/ranks?rank=13'")


def test_the_step_range_form_changes_the_range(portal, browser):
    browser.goto(portal.at("#/runs/lr-nan/timeline?from=90&to=120"))
    assert browser.count("[data-testid=timeline-event][data-kind=alert]") == 0
    browser.eval("document.querySelector('[data-testid=timeline-from]').value = ''")
    browser.type("[data-testid=timeline-from]", "165")
    browser.eval("document.querySelector('[data-testid=timeline-to]').value = ''")
    browser.type("[data-testid=timeline-to]", "185")
    browser.key("[data-testid=timeline-to]", "Enter")
    browser.wait("location.hash === '#/runs/lr-nan/timeline?from=165&to=185'")
    browser.wait_ready()
    browser.wait("document.querySelectorAll('[data-testid=timeline-event][data-alert-kind=nan_loss]').length >= 1")
