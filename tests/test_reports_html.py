"""report.html: self-contained, escaped, readable without JavaScript; driven in headless Chromium.

The browser tests need Debian's ``chromium`` and ``chromium-driver`` and the
``selenium`` package; they skip when one is missing, except under ``CI=true``
(``.ci/run`` installs them), where they fail instead. Screenshots go to
``test-artifacts/`` (git-ignored).
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import re
import shutil
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, ClassVar

import pytest

from multiturn_eval.reports.html import STATIC_TURNS, render_html
from multiturn_eval.results import Report

from .reports_fixtures import (
    ARTIFACTS_DIR,
    UPDATE_GOLDEN,
    call,
    case,
    failing_report,
    interrupted_report,
    large_report,
    metric,
    report,
    sample_report,
    turn,
)

DOCS_SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "report-html.png"


class Elements(HTMLParser):
    """Tags with their attributes, script bodies and the text outside scripts."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.styles: list[str] = []
        self._raw: str | None = None
        self._attrs: dict[str, str | None] = {}
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._raw, self._attrs = "", dict(attrs)

    def handle_data(self, data: str) -> None:
        if self._raw is not None:
            self._raw += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._raw is not None:
            self.scripts.append((self._attrs, self._raw))
            self._raw = None
        elif tag == "style" and self._raw is not None:
            self.styles.append(self._raw)
            self._raw = None

    def all(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for t, attrs in self.elements if t == tag]


def sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def embedded_data(page: str) -> Any:
    (data,) = [
        body for attrs, body in Elements(page).scripts if attrs.get("type") == "application/json"
    ]
    return json.loads(data)


# --------------------------------------------------------------------- static checks


def test_self_contained_with_a_strict_content_security_policy() -> None:
    page = render_html(sample_report())
    parsed = Elements(page)
    for tag, attrs in parsed.elements:
        for name in ("src", "href", "action", "formaction", "srcset", "poster", "data"):
            value = attrs.get(name)
            assert value is None or value.startswith("data:"), (tag, name, value)
    (csp,) = [
        a["content"] for a in parsed.all("meta") if a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert csp is not None
    assert "default-src 'none'" in csp and "'unsafe-inline'" not in csp
    (script,) = [body for attrs, body in parsed.scripts if "type" not in attrs]
    (style,) = parsed.styles
    assert f"script-src {sha256(script)};" in csp  # the only script allowed to run is ours
    assert f"style-src {sha256(style)};" in csp
    assert "url(" not in style and "@import" not in style and "@font-face" not in style


def test_a_row_per_test_case_with_verdict_and_first_failure_readable_without_js() -> None:
    rep = sample_report()
    page = render_html(rep)
    rows = Elements(page).all("details")
    assert [r["data-outcome"] for r in rows] == [c.outcome for c in rep.results]
    assert [r["id"] for r in rows] == [f"case-{i}" for i in range(len(rep.results))]
    text = re.sub(r"<[^>]+>", "", page)
    assert "turn 2: tools: subtract: no call matched; closest call #1: arg &#39;b&#39;" in page
    assert "turn 1: timed out after 60 s (turn_timeout)" in text
    assert "5 of 7 test cases failed" in text
    # failing cases carry their turns as static HTML for readers without JavaScript
    # every case's turns also as static HTML for readers without JavaScript
    noscript = re.findall(r"<noscript>(.*?)</noscript>", page, re.DOTALL)
    assert len(noscript) == 7
    assert [n.count('<section class="turn') for n in noscript] == [2, 3, 2, 3, 1, 1, 1]
    assert "The difference is 51,000 | roughly. cc @octocat &lt;/details&gt;" in noscript[1]


def test_turn_data_is_embedded_whole_and_cannot_close_its_script() -> None:
    payload = "</script><script>window.pwned=1</script><!-- <script> & \u2028 " + "z" * 100_000
    hostile = failing_report(1, response=payload, turns=2)
    page = render_html(hostile)
    assert page.count("</script>") == 2  # the JSON block's and the script's own
    assert "<script>window.pwned" not in page
    data = embedded_data(page)
    assert data[0][1]["response"] == payload  # kept whole, byte for byte
    assert data[0][0]["response"] == "42"


def test_hostile_text_is_escaped_in_static_html() -> None:
    payload = '<img src="http://127.0.0.1:9/x.png" onerror="alert(1)"> & "quoted" \x1b[31mred\x00'
    hostile = case(
        0,
        payload,
        [turn(0, payload, payload, ground_truth="1", tools=[call("t", payload, x=payload)],
              metrics=[metric("numeric", False, payload)])],
        suite_name=payload,
    )  # fmt: skip
    page = render_html(report([hostile]))
    assert "<img" not in page
    assert "&lt;img src=&#34;http://127.0.0.1:9/x.png&#34; onerror=&#34;alert(1)&#34;&gt;" in page
    assert "\x1b" not in page and "\x00" not in page.replace("\\u0000", "")
    parsed = Elements(page)
    assert not parsed.all("img")
    (row,) = parsed.all("details")
    shown = '<img src="http://127.0.0.1:9/x.png" onerror="alert(1)"> & "quoted" red'
    assert row["data-name"] == f"{shown} {shown}".lower()  # suite and case name, for the search


def test_lone_surrogates_from_an_agent_do_not_break_the_page() -> None:
    page = render_html(failing_report(1, response="half \ud83d pair", turns=1))
    page.encode("utf-8")
    assert embedded_data(page)[0][0]["response"] == "half \ufffd pair"


def test_static_details_are_capped_failing_cases_first() -> None:
    rep = large_report(1000, 4)  # 100 failing cases, 900 passing, 4 turns each
    page = render_html(rep)
    assert page.count('<section class="turn') == STATIC_TURNS
    rows = re.findall(r'<details class="case (\w+)".*?</details>', page, re.DOTALL)
    static = re.findall(
        r'<details class="case (\w+)"[^>]*>(?:(?!</details>).)*<noscript>\s*<section',
        page,
        re.DOTALL,
    )
    assert len(rows) == 1000
    assert static.count("failed") == 100  # all failures first
    assert len(static) == STATIC_TURNS // 4
    assert page.count("Turn details need JavaScript here") == 1000 - STATIC_TURNS // 4


def test_interrupted_run_has_a_notice() -> None:
    page = render_html(interrupted_report())
    assert "The run did not complete (interrupted by SIGTERM)" in page
    assert 'data-outcome="skipped"' in page


# ------------------------------------------------------------------------- browser


def _browser_missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed"
    for tool in ("chromium", "chromedriver"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install chromium chromium-driver)"
    return None


def _driver(profile: Path, javascript: bool = True) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        f"--user-data-dir={profile}",  # a fresh profile: nothing cached, nothing synced
    ):
        options.add_argument(arg)
    if not javascript:
        options.add_experimental_option(
            "prefs", {"profile.managed_default_content_settings.javascript": 2}
        )
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    service = Service(shutil.which("chromedriver") or "chromedriver")
    return webdriver.Chrome(service=service, options=options)


def _browser(tmp_path_factory: pytest.TempPathFactory, javascript: bool) -> Iterator[Any]:
    missing = _browser_missing()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests cannot run in CI: {missing}")
        pytest.skip(missing)
    driver = _driver(tmp_path_factory.mktemp("chromium-profile"), javascript=javascript)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from _browser(tmp_path_factory, javascript=True)


@pytest.fixture(scope="module")
def browser_no_js(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from _browser(tmp_path_factory, javascript=False)


def open_report(driver: Any, rep: Report, tmp_path: Path, name: str = "report.html") -> str:
    path = tmp_path / name
    path.write_text(render_html(rep), encoding="utf-8")
    url = path.as_uri()
    driver.get_log("browser")  # drop anything logged before this page
    driver.get_log("performance")
    driver.get(url)
    return url


def console_errors(driver: Any) -> list[Any]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def requests_made(driver: Any, page_url: str) -> list[str]:
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] != "Network.requestWillBeSent":
            continue
        url = message["params"]["request"]["url"]
        if url.startswith(("http:", "https:", "ws:", "wss:", "ftp:")) or (
            message["params"].get("documentURL") == page_url
            and url != page_url
            and not url.startswith("data:")
        ):
            urls.append(url)
    return urls


def visible_rows(driver: Any) -> list[str]:
    from selenium.webdriver.common.by import By

    return [
        row.get_attribute("id")
        for row in driver.find_elements(By.CSS_SELECTOR, "details.case")
        if row.is_displayed()
    ]


def wait_for(driver: Any, css: str) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, css))


def screenshot(driver: Any, name: str) -> Path:
    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS_DIR / name
    driver.save_screenshot(str(path))
    return path


@pytest.mark.browser
def test_rows_expand_filter_and_search_with_no_network_and_no_console_error(
    browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    url = open_report(browser, sample_report(), tmp_path)
    assert browser.find_element(By.ID, "controls").is_displayed()
    assert browser.find_element(By.ID, "shown").text == "showing 7 of 7"
    # nothing is drawn until a row is opened
    assert browser.find_elements(By.CSS_SELECTOR, ".turns section") == []

    browser.find_element(By.CSS_SELECTOR, "#case-1 > summary").click()
    sections = wait_for(browser, "#case-1 .turns section.turn")
    assert len(sections) == 3
    turn2 = sections[1]
    assert "failed" in turn2.get_attribute("class")
    assert "The difference is 51,000 | roughly. cc @octocat </details>" in turn2.text
    assert "math-subtract" in turn2.text and '"b": "182,795"' in turn2.text
    checks = turn2.find_elements(By.CSS_SELECTOR, "ul.checks li")
    assert [c.get_attribute("class") for c in checks] == ["fail", "fail"]
    assert "subtract: no call matched" in checks[0].text
    passed_check = sections[0].find_element(By.CSS_SELECTOR, "ul.checks li")
    assert passed_check.get_attribute("class") == "pass"
    screenshot(browser, "report-html-expanded.png")

    browser.find_element(By.ID, "only-failures").click()
    assert visible_rows(browser) == ["case-1", "case-2", "case-3", "case-4", "case-6"]
    assert browser.find_element(By.ID, "shown").text == "showing 5 of 7"
    if UPDATE_GOLDEN:  # the README's picture, regenerated with the golden files
        DOCS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        browser.set_window_size(1100, 1350)
        browser.save_screenshot(str(DOCS_SCREENSHOT))
        browser.set_window_size(1280, 900)
    search = browser.find_element(By.ID, "search")
    search.send_keys("SUPPORT")
    assert visible_rows(browser) == ["case-4", "case-6"]
    browser.find_element(By.ID, "only-failures").click()
    assert visible_rows(browser) == ["case-4", "case-5", "case-6"]
    search.clear()
    search.send_keys("slow")
    assert visible_rows(browser) == ["case-2"]
    screenshot(browser, "report-html-filtered.png")

    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert requests_made(browser, url) == []
    assert console_errors(browser) == []


class _Recorder(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[str]:
    _Recorder.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.browser
def test_hostile_agent_text_makes_no_request_and_runs_no_script(
    browser: Any, tmp_path: Path, listener: str
) -> None:
    from selenium.webdriver.common.by import By

    payload = (
        f'<img src="{listener}/img"><script src="{listener}/js"></script>'
        f"</script><script>window.pwned=1;fetch('{listener}/fetch')</script>"
        f'<link rel=stylesheet href="{listener}/css"><iframe src="{listener}/frame"></iframe>'
        f"![x]({listener}/md) \x1b[31mred\x00"
    )
    hostile = case(
        0,
        payload,
        [
            turn(
                0,
                payload,
                payload,
                ground_truth=payload,
                tools=[call(payload, payload, arg=payload)],
                expected_tools=[("x", None, payload)],
                metrics=[metric("numeric", False, payload)],
                warnings=[payload],
            ),
            turn(1, payload, None, errors=[payload], infrastructure_error=True),
        ],
        suite_name=payload,
        errors=[f"could not open a session: {payload}"],
    )
    url = open_report(browser, report([hostile, case(1, "ok", [turn(0, "q", payload)])]), tmp_path)
    for row in browser.find_elements(By.CSS_SELECTOR, "details.case > summary"):
        row.click()
    wait_for(browser, "#case-1 .turns section")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#case-0 .turns section")) == 2
    response = browser.find_element(
        By.CSS_SELECTOR, "#case-0 .turns dl.fields dd:nth-of-type(3) pre"
    )
    assert response.text.startswith('<img src="')  # shown as text, whole
    assert "\x1b" not in response.text and "red" in response.text
    assert browser.execute_script("return window.pwned === undefined")
    assert browser.find_elements(By.CSS_SELECTOR, "main img, main iframe, main script") == []
    assert _Recorder.hits == []
    assert requests_made(browser, url) == []
    assert console_errors(browser) == []
    screenshot(browser, "report-html-hostile.png")


@pytest.mark.browser
def test_readable_without_javascript(browser_no_js: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    open_report(browser_no_js, sample_report(), tmp_path)
    assert not browser_no_js.find_element(By.ID, "controls").is_displayed()
    summaries = browser_no_js.find_elements(By.CSS_SELECTOR, "details.case > summary")
    assert len(summaries) == 7
    assert "turn 2: tools: subtract: no call matched" in summaries[1].text
    summaries[1].click()
    turns = browser_no_js.find_elements(By.CSS_SELECTOR, "#case-1 section.turn")
    assert [t.is_displayed() for t in turns] == [True, True, True]
    assert "The difference is 51,000 | roughly." in turns[1].text
    screenshot(browser_no_js, "report-html-no-js.png")


@pytest.mark.browser
def test_a_thousand_test_cases_stay_light(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    url = open_report(browser, large_report(1000, 4), tmp_path, "large.html")
    # closed rows hold no turn elements: details are drawn on demand
    assert browser.execute_script("return document.querySelectorAll('section.turn').length") == 0
    assert browser.execute_script("return document.getElementsByTagName('*').length") < 20_000
    browser.find_element(By.ID, "only-failures").click()
    assert len(visible_rows(browser)) == 100
    last = browser.find_element(By.CSS_SELECTOR, "#case-990 > summary")
    browser.execute_script("arguments[0].scrollIntoView()", last)
    last.click()
    wait_for(browser, "#case-990 section.turn")
    assert browser.execute_script("return document.querySelectorAll('section.turn').length") == 4
    browser.find_element(By.ID, "search").send_keys("case_0990")
    assert visible_rows(browser) == ["case-990"]
    assert requests_made(browser, url) == []
    assert console_errors(browser) == []


@pytest.mark.browser
def test_a_link_to_a_test_case_opens_it(browser: Any, tmp_path: Path) -> None:
    url = open_report(browser, sample_report(), tmp_path)
    browser.get(url + "#case-2")
    sections = wait_for(browser, "#case-2 section.turn")
    assert len(sections) == 2
    assert browser.execute_script("return document.getElementById('case-2').open")


HOSTILE_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/repo/agent.py", line 3, in send\n'
    '    raise ValueError("</script><script>alert(1)</script>")\n'
    "ValueError: </pre></details><img src=x onerror=alert(1)>"
)


def traced_report() -> Report:
    from multiturn_eval.results import UserTraceback

    rep = sample_report()
    turns = rep.results[1].turns
    assert turns is not None
    turns[1].tracebacks = [UserTraceback(where="the agent's send()", traceback=HOSTILE_TRACEBACK)]
    return rep


def test_a_traceback_is_folded_under_its_turn_as_text() -> None:
    page = render_html(traced_report())
    assert "<summary>Traceback of the agent&#39;s send()</summary>" in page
    assert "<img src=x" not in page and "</script><script>alert" not in page
    assert "&lt;/pre&gt;&lt;/details&gt;&lt;img src=x onerror=alert(1)&gt;" in page


@pytest.mark.browser
def test_the_script_draws_a_turns_traceback_folded(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    open_report(browser, traced_report(), tmp_path)
    browser.find_element(By.CSS_SELECTOR, "#case-1 > summary").click()
    sections = wait_for(browser, "#case-1 .turns section.turn")
    [folded] = sections[1].find_elements(By.CSS_SELECTOR, "details.traceback")
    assert folded.find_element(By.TAG_NAME, "summary").text == "Traceback of the agent's send()"
    assert not folded.get_attribute("open")
    folded.find_element(By.TAG_NAME, "summary").click()
    assert folded.find_element(By.TAG_NAME, "pre").text == HOSTILE_TRACEBACK
    assert sections[0].find_elements(By.CSS_SELECTOR, "details.traceback") == []
    assert browser.find_elements(By.CSS_SELECTOR, "img") == []
    assert console_errors(browser) == []
