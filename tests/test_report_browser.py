"""The HTML report in a real headless browser (the system Chromium, driven by Selenium).

The report of the session's `detected_samples` warehouse is built through the real
command line (`causal-spark report`, which starts no Spark), opened from file://, and
checked in the DOM against the rows of the violations, crowns and crown_members tables:
one arrow per message of each diagram's window, and exactly the finding's messages
highlighted in their roles. Screenshots go to a folder whose path the test prints.

Chromium comes from the system packages (`.ci/run` installs it); without it the test
skips and says why.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import read_delta
from tests.test_cli import BIN, ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None or CHROMEDRIVER is None,
        reason="Chromium and chromedriver are not installed "
        "(apt-get install -y chromium chromium-driver; .ci/run does it)",
    ),
]


@pytest.fixture(scope="module")
def report(detected_samples: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    done = subprocess.run(
        [
            str(BIN / "causal-spark"),
            "report",
            "--warehouse",
            str(detected_samples),
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {out / 'index.html'}")
    return out / "index.html"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report-screenshots")
    print(f"\nreport screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def page(report: Path, browser: Any, shots: Path) -> Any:
    began = time.monotonic()
    browser.get(report.as_uri())
    loaded = time.monotonic() - began
    timing = browser.execute_script(
        "var t = performance.timing; return t.loadEventEnd - t.navigationStart;"
    )
    assert loaded < 5 and timing < 5000, f"the page took {loaded:.1f} s ({timing} ms) to load"
    browser.save_screenshot(str(shots / "top.png"))
    return browser


def _tables(warehouse: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        name: read_delta(warehouse / name).to_pylist()
        for name in (
            "messages",
            "violations",
            "crowns",
            "crown_members",
            "trace_summary",
            "trace_clocks",
        )
    }


def _diagram(section: Any) -> tuple[dict[str, str], list[str], set[tuple[str, int]]]:
    """The diagram's arrows (msg -> role), every arrow's msg (with repeats) and its events."""
    from selenium.webdriver.common.by import By

    arrows = section.find_elements(By.CSS_SELECTOR, "svg.diagram line.msg")
    ids = [a.get_attribute("data-msg") for a in arrows]
    roles = {a.get_attribute("data-msg"): a.get_attribute("data-role") for a in arrows}
    events = set()
    for mark in section.find_elements(By.CSS_SELECTOR, "svg.diagram circle.event"):
        process, lseq = mark.get_attribute("data-event").rsplit("#", 1)
        events.add((process, int(lseq)))
    return roles, ids, events


def _in_window(m: dict[str, Any], events: set[tuple[str, int]]) -> bool:
    ends = [(m["src"], m["send_lseq"]), (m["dst"], m["recv_lseq"])]
    ends = [e for e in ends if e[0] is not None and e[1] is not None]
    return bool(ends) and all(e in events for e in ends)


def test_no_console_errors(page: Any) -> None:
    errors = [e for e in page.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


def test_every_finding_is_drawn_with_exactly_its_messages_highlighted(
    page: Any, detected_samples: Path, shots: Path
) -> None:
    from selenium.webdriver.common.by import By

    t = _tables(detected_samples)
    messages: dict[str, list[dict[str, Any]]] = {}
    for m in t["messages"]:
        messages.setdefault(m["trace_id"], []).append(m)
    sections = page.find_elements(By.CSS_SELECTOR, "section.finding")
    expected_count = (
        len(t["violations"])
        + len(t["crowns"])
        + sum(1 for s in t["trace_summary"] if s["order_class"] == "INVALID")
    )
    assert len(sections) == expected_count > 0
    traces_with_findings = {v["trace_id"] for v in t["violations"]} | {
        c["trace_id"] for c in t["crowns"]
    }
    assert traces_with_findings <= {s.get_attribute("data-trace") for s in sections}

    def section(trace: str, **keys: str) -> Any:
        found = [
            s
            for s in sections
            if s.get_attribute("data-trace") == trace
            and all(s.get_attribute(f"data-{k}") == v for k, v in keys.items())
        ]
        assert len(found) == 1, (trace, keys)
        return found[0]

    def check(sec: Any, trace: str, highlighted: dict[str, str]) -> None:
        roles, ids, events = _diagram(sec)
        assert len(ids) == len(set(ids)), "one arrow per message"
        window = {m["msg_id"] for m in messages[trace] if _in_window(m, events)}
        assert set(ids) == window
        omitted = int(
            sec.find_element(By.CSS_SELECTOR, "svg.diagram").get_attribute("data-omitted-messages")
        )
        assert len(ids) + omitted == len(messages[trace])
        assert {m: r for m, r in roles.items() if r != "other"} == highlighted
        sec.screenshot(str(shots / f"{sec.get_attribute('id')}.png"))

    for v in t["violations"]:
        sec = section(
            v["trace_id"],
            kind=v["kind"],
            overtaken=v["overtaken_msg"],
            overtaking=v["overtaking_msg"],
        )
        expected = {m: "witness" for m in v["chain"]}
        expected.update({v["overtaken_msg"]: "overtaken", v["overtaking_msg"]: "overtaking"})
        check(sec, v["trace_id"], expected)
        assert v["overtaken_msg"] in sec.text and v["overtaking_msg"] in sec.text  # the words
    for c in t["crowns"]:
        sec = section(c["trace_id"], scc=str(c["scc_id"]))
        members = {
            m["msg_id"]
            for m in t["crown_members"]
            if m["trace_id"] == c["trace_id"] and m["scc_id"] == c["scc_id"]
        }
        expected = {m: "member" for m in members} | {m: "crown" for m in c["crown"]}
        check(sec, c["trace_id"], expected)
    for row in t["trace_clocks"]:
        if row["status"] == "INVALID":
            sec = section(row["trace_id"])
            assert sec.get_attribute("data-kind") == "CYCLE"
            check(sec, row["trace_id"], {m: "cycle" for m in row["cycle"]})


def test_traces_table_sorts_and_filters(page: Any, detected_samples: Path) -> None:
    from selenium.webdriver.common.by import By

    summaries = read_delta(detected_samples / "trace_summary").to_pylist()
    rows = page.find_elements(By.CSS_SELECTOR, "#traces tbody tr")
    assert sorted(r.find_elements(By.TAG_NAME, "td")[0].text for r in rows) == sorted(
        s["trace_id"] for s in summaries
    )
    header = page.find_elements(By.CSS_SELECTOR, "#traces thead th")
    header[3].click()  # events, ascending
    events = [
        int(r.find_elements(By.TAG_NAME, "td")[3].text)
        for r in page.find_elements(By.CSS_SELECTOR, "#traces tbody tr")
    ]
    assert events == sorted(events)
    header[3].click()  # descending
    events = [
        int(r.find_elements(By.TAG_NAME, "td")[3].text)
        for r in page.find_elements(By.CSS_SELECTOR, "#traces tbody tr")
    ]
    assert events == sorted(events, reverse=True)
    box = page.find_element(By.ID, "trace-filter")
    box.send_keys("crowns")
    visible = [
        r for r in page.find_elements(By.CSS_SELECTOR, "#traces tbody tr") if r.is_displayed()
    ]
    assert sorted(r.find_elements(By.TAG_NAME, "td")[0].text for r in visible) == sorted(
        s["trace_id"] for s in summaries if "crowns" in s["trace_id"]
    )
    assert page.find_element(By.ID, "traces-shown").text == str(len(visible))
    classes = {
        g.get_attribute("data-class"): int(g.get_attribute("data-count"))
        for g in page.find_elements(By.CSS_SELECTOR, "#order-classes g.bar")
    }
    counted: dict[str, int] = {}
    for s in summaries:
        counted[s["order_class"]] = counted.get(s["order_class"], 0) + 1
    assert classes == counted
    box.clear()


def test_the_run_section_shows_the_counts_and_the_quarantine(
    page: Any, detected_samples: Path
) -> None:
    from selenium.webdriver.common.by import By

    quarantine = read_delta(detected_samples / "quarantine").to_pylist()
    counted: dict[str, int] = {}
    for q in quarantine:
        counted[q["reason"]] = counted.get(q["reason"], 0) + 1
    rows = page.find_elements(By.CSS_SELECTOR, "#quarantine tbody tr")
    shown = {
        r.find_elements(By.TAG_NAME, "td")[0].text: int(r.find_elements(By.TAG_NAME, "td")[1].text)
        for r in rows
    }
    assert shown == counted and counted
    text = page.find_element(By.ID, "quarantine").text
    for q in quarantine[:3]:
        assert q["reason"] in text
    accounting = {
        r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[1].text
        for r in page.find_elements(By.CSS_SELECTOR, "#accounting tbody tr")
    }
    assert accounting["quarantine"] == str(len(quarantine))
    assert accounting["events"] == str(len(read_delta(detected_samples / "events")))


def test_delivery_timelines_show_which_messages_were_held_back_and_how_long(
    browser: Any, shots: Path, tmp_path: Path
) -> None:
    """On a small replayed warehouse that delta-rs commits (no Spark): one bar per arrived
    copy of each drawn trace, held back exactly where the deliveries table says, each
    held bar as long on screen as its delay; in a tab of its own, closed after."""
    from selenium.webdriver.common.by import By

    from causal_spark.report.build import write_report
    from tests.test_report_replay import replay_warehouse

    warehouse = replay_warehouse(tmp_path / "warehouse")
    page = write_report(str(warehouse), tmp_path / "out")
    rows = [
        r for r in read_delta(warehouse / "deliveries").to_pylist() if r["arrival_time"] is not None
    ]
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    try:
        browser.get(page.as_uri())
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
        bars = browser.find_elements(By.CSS_SELECTOR, "section.timeline rect.delivery")
        shown = {}
        for b in bars:
            section = b.find_element(By.XPATH, "ancestor::section")
            key = (
                section.get_attribute("data-trace"),
                b.get_attribute("data-protocol"),
                b.get_attribute("data-msg"),
            )
            assert key not in shown, "one bar per copy"
            shown[key] = b
        assert set(shown) == {(r["trace_id"], r["protocol"], r["msg_id"]) for r in rows}
        held = [r for r in rows if r["held_back"]]
        assert held
        for r in rows:
            bar = shown[(r["trace_id"], r["protocol"], r["msg_id"])]
            assert bar.get_attribute("data-held") == ("yes" if r["held_back"] else "no")
            assert bar.is_displayed()
        # on screen, a held bar's width per second of delay is the trace's time scale
        t1 = {k[1:]: b for k, b in shown.items() if k[0] == "t1"}
        one, six = t1[("none", "m1")].rect["x"], t1[("none", "m3")].rect["x"]
        scale = (six - one) / 5.0
        for r in held:
            width = shown[(r["trace_id"], r["protocol"], r["msg_id"])].rect["width"]
            delay = r["delivery_time"] - r["arrival_time"]
            assert abs(width - delay * scale) < 1.5, (r["msg_id"], width, delay * scale)
        section = browser.find_element(By.ID, "timeline-t1")
        section.screenshot(str(shots / "timeline-t1.png"))
    finally:
        browser.close()
        browser.switch_to.window(first)
