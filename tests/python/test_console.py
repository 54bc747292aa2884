"""The web console (GET /) in a real browser: Debian's headless Chromium
driven by selenium. Chat with the tiny model and with Gemma (streamed text,
the same reply the API gives), Stop (the server cancels the request and
frees its blocks), the dashboard under load (its numbers move, its TTFT
median lies where the server's own timings put it), a bench report and the
ticket of two, the API key, the keyboard and a narrow screen. Screenshots
go to $TOKENMILL_ARTIFACTS (the test's output directory under
test-results/), else the test's tmp dir."""
import json
import os
import shutil
import statistics
import subprocess
import threading
import time

import pytest
import yaml

from conftest import missing_dependency, require_module, run_tokenmill
from test_server_common import Server

webdriver = require_module("selenium.webdriver", "selenium", "the browser tests of the web console")
from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    path = os.environ.get("TOKENMILL_ARTIFACTS") or str(tmp_path_factory.mktemp("console-artifacts"))
    os.makedirs(path, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM or not CHROMEDRIVER:
        missing_dependency("Debian packages chromium and chromium-driver (scripts/setup.sh installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000", "--force-prefers-reduced-motion", "--lang=en-US"):
        options.add_argument(arg)
    # The driver Debian ships, never one fetched from the network.
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


def wait(driver, predicate, timeout=30, what="condition"):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: predicate(d))
    except TimeoutException:
        logs = []
        try:
            logs = driver.get_log("browser")
        except Exception:  # noqa: BLE001 - the log is only a diagnostic
            pass
        raise AssertionError(f"timed out waiting for {what}; browser log: {logs}") from None


def open_console(driver, server, tab="chat"):
    driver.get(f"{server.base}/#{tab}")
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"), what="the model list")


def shot(driver, artifacts, name):
    path = os.path.join(artifacts, f"{name}.png")
    driver.save_screenshot(path)
    return path


def by_id(driver, element_id):
    return driver.find_element(By.ID, element_id)


def set_value(driver, element_id, value):
    e = by_id(driver, element_id)
    e.clear()
    e.send_keys(str(value))


def watch_stream(driver):
    """Records the length of the newest reply's text at every change, so a
    test can tell text that arrived piece by piece from text set once."""
    driver.execute_script("""
        window.__lengths = [];
        new MutationObserver(() => {
          const c = document.querySelector('#messages li[data-role=assistant]:last-child .content');
          if (c && c.textContent.length !== window.__lengths.at(-1)) window.__lengths.push(c.textContent.length);
        }).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});""")


def text_of(message):
    return message.find_element(By.CSS_SELECTOR, ".content").get_attribute("textContent")


def last_reply(driver):
    return driver.find_elements(By.CSS_SELECTOR, "#messages li[data-role=assistant]")[-1]


def chat_once(driver, text, max_tokens):
    set_value(driver, "temperature", 0)
    set_value(driver, "max-tokens", max_tokens)
    watch_stream(driver)
    set_value(driver, "prompt", text)
    by_id(driver, "send").click()
    wait(driver, lambda d: last_reply(d).get_attribute("data-state") != "streaming", what="the reply to finish")
    reply = last_reply(driver)
    assert reply.get_attribute("data-state") == "done", reply.text
    return reply


def api_reply(server, model, text, max_tokens):
    r = server.client().chat.completions.create(model=model, messages=[{"role": "user", "content": text}],
                                                temperature=0, top_p=0.95, max_tokens=max_tokens)
    return r.choices[0].message.content, r.usage.completion_tokens


def check_chat(driver, server, model, text, max_tokens):
    reply = chat_once(driver, text, max_tokens)
    content = text_of(reply)
    expected, tokens = api_reply(server, model, text, max_tokens)
    # The page sent what the settings say: greedy, the same reply the API gives.
    assert content == expected, (content, expected)
    assert int(reply.get_attribute("data-completion-tokens")) == tokens
    assert float(reply.get_attribute("data-ttft-ms")) > 0
    assert reply.get_attribute("data-finish-reason") in ("length", "stop")
    lengths = driver.execute_script("return window.__lengths")
    assert len(lengths) >= 3 and lengths == sorted(lengths), f"text did not arrive piece by piece: {lengths}"
    assert "TTFT" in reply.find_element(By.CSS_SELECTOR, ".stats").text
    return reply


def test_chat_streams_the_same_reply_as_the_api_on_the_tiny_model(tokenmill_bin, slow, browser, artifacts):
    with Server(tokenmill_bin, slow, "--chat-template", "chatml", "--model-alias", "slow") as s:
        open_console(browser, s)
        assert browser.title == "tokenmill console"
        # The page's own files come from the binary, with a strict policy.
        r = s.http.get("/console/chat.js")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
        assert "script-src 'self'" in s.http.get("/").headers["content-security-policy"]
        assert s.http.get("/console/chat.js", headers={"If-None-Match": r.headers["etag"]}).status_code == 304
        assert s.http.get("/console/nothing.js").status_code == 404
        assert s.http.get("/console/favicon.svg").headers["content-type"] == "image/svg+xml"
        check_chat(browser, s, "slow", "Hello there", 40)
        # A second turn carries the first one: the API agrees on the whole conversation.
        reply = chat_once(browser, "And then?", 12)
        first = text_of(browser.find_elements(By.CSS_SELECTOR, "#messages li[data-role=assistant]")[0])
        r = s.client().chat.completions.create(
            model="slow", temperature=0, top_p=0.95, max_tokens=12,
            messages=[{"role": "user", "content": "Hello there"}, {"role": "assistant", "content": first},
                      {"role": "user", "content": "And then?"}])
        assert text_of(reply) == r.choices[0].message.content


def test_chat_with_gemma_says_it_is_a_base_model(tokenmill_bin, gemma_path, browser, artifacts):
    with Server(tokenmill_bin, gemma_path, "--model-alias", "gemma", "-t", "2") as s:
        open_console(browser, s)
        note = by_id(browser, "model-note")
        assert note.is_displayed() and "base model" in note.text
        set_value(browser, "system", "")
        check_chat(browser, s, "gemma", "The capital of France is", 24)
        shot(browser, artifacts, "console-chat")
        # The dashboard with a little load, for the README.
        by_id(browser, "tab-dashboard").click()
        c = s.client()
        threads = [threading.Thread(target=lambda: c.completions.create(
            model="gemma", prompt="Once upon a time", max_tokens=48, temperature=0.8)) for _ in range(6)]
        for t in threads:
            t.start()
        wait(browser, lambda d: (tile(d, "running") or 0) >= 2, what="the load on the dashboard")
        time.sleep(2)
        for t in threads:
            t.join()
        wait(browser, lambda d: tile(d, "completed") == 8 and tile(d, "output-tok-s") is not None,  # page, API, 6
             what="the load to finish")
        shot(browser, artifacts, "console-dashboard-gemma")


def test_structured_output_and_adapters_are_offered(tokenmill_bin, tiny, browser, tmp_path):
    adapter = str(tmp_path / "style.gguf")
    run_tokenmill(tokenmill_bin, "synth-lora", "-m", tiny, "-o", adapter, "--seed", "4", "--strength", "0.5")
    with Server(tokenmill_bin, tiny, "--chat-template", "chatml", "--model-alias", "tiny",
                "--lora", f"style={adapter}") as s:
        open_console(browser, s)
        options = {o.get_attribute("value"): o.text for o in browser.find_elements(By.CSS_SELECTOR, "#model option")}
        assert options == {"tiny": "tiny", "style": "style (on tiny)"}
        # A schema-constrained reply from the adapter: the page sends
        # response_format and the model it names.
        browser.find_element(By.CSS_SELECTOR, "#model option[value=style]").click()
        browser.find_element(By.CSS_SELECTOR, "#response-format option[value=json_schema]").click()
        assert by_id(browser, "schema").is_displayed()
        schema = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}}, "required": ["answer"],
                  "additionalProperties": False}
        set_value(browser, "schema", json.dumps(schema))
        reply = chat_once(browser, "Yes or no?", 48)
        assert json.loads(text_of(reply))["answer"] in ("yes", "no")
        assert s.metrics()['tokenmill_adapter_requests_total{adapter="style"}'] == 1
        # A schema that is not JSON is caught in the page, with the reason.
        set_value(browser, "schema", "{not json")
        set_value(browser, "prompt", "again")
        by_id(browser, "send").click()
        wait(browser, lambda d: last_reply(d).get_attribute("data-state") == "error", what="the schema error")
        assert "not valid JSON" in text_of(last_reply(browser))


def test_stop_cancels_the_request_on_the_server(tokenmill_bin, slow, browser, artifacts):
    with Server(tokenmill_bin, slow, "--chat-template", "chatml", "--model-alias", "slow", "-t", "1") as s:
        open_console(browser, s)
        set_value(browser, "max-tokens", 3000)
        set_value(browser, "prompt", "Tell me a long story")
        by_id(browser, "prompt").send_keys(Keys.ENTER)  # Enter sends
        wait(browser, lambda d: len(text_of(last_reply(d))) > 20,
             what="text to stream")
        s.wait_metric(lambda m: m["tokenmill_requests_running"] == 1)
        by_id(browser, "stop").click()
        wait(browser, lambda d: last_reply(d).get_attribute("data-state") == "stopped", what="the reply to stop")
        m = s.wait_metric(lambda m: m["tokenmill_requests_running"] == 0
                          and m['tokenmill_requests_finished_total{reason="cancelled"}'] == 1, timeout=10)
        assert m["tokenmill_kv_blocks_used"] == 0
        n = int(last_reply(browser).get_attribute("data-completion-tokens"))
        assert 0 < n < 3000
        assert not by_id(browser, "send").get_property("disabled")


def no_sideways_scroll(driver):
    """How many pixels the page is wider than the window (0 or less: none)."""
    return driver.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")


def tile(driver, key):
    """A dashboard number as the page computed it (the tiles are redrawn
    every second, so they are read by id, not held)."""
    value = driver.execute_script(f"return document.getElementById('m-{key}')?.dataset.value ?? null")
    return float(value) if value not in ("", None) else None


def test_dashboard_follows_load_and_places_the_ttft_median(tokenmill_bin, slow, browser, artifacts):
    with Server(tokenmill_bin, slow, "--model-alias", "slow", "-t", "1", "--max-seqs", "4") as s:
        open_console(browser, s, "dashboard")
        wait(browser, lambda d: tile(d, "running") is not None, what="the first reading")
        assert tile(browser, "completed") == 0
        config = by_id(browser, "config").text
        [ready] = [e for e in s.events() if e.get("event") == "ready"]
        for shown in ("slow.gguf", "Q8_0", ready["isa"], ready["kv_dtype"], f"{ready['max_model_len']:,}"):
            assert shown in config, (shown, config)
        time.sleep(1.5)  # the window starts before the load
        ttfts, errors = [], []
        shown = threading.Event()

        # The load lasts until the page has shown it (a page starved of CPU
        # on a busy machine may poll late), at least three requests a client.
        def client():
            c = s.client()
            try:
                done = 0
                while done < 3 or not shown.is_set():
                    r = c.completions.create(model="slow", prompt="a b c d e f g", max_tokens=96, temperature=0)
                    ttfts.append(r.model_extra["timings"]["ttft_ms"])
                    done += 1
            except Exception as e:  # noqa: BLE001 - reported by the assertion below
                errors.append(e)

        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        try:
            wait(browser, lambda d: (tile(d, "running") or 0) > 0 and (tile(d, "output-tok-s") or 0) > 0,
                 timeout=120, what="the dashboard to show the load")
            shot(browser, artifacts, "console-dashboard")
        finally:
            shown.set()
            for t in threads:
                t.join()
        assert not errors, errors
        n = len(ttfts)
        wait(browser, lambda d: tile(d, "completed") == n and tile(d, "running") == 0, what="the load to finish")
        # The engine's histogram has coarse buckets: the page's median must
        # lie in the bucket that holds the median of the server's timings
        # (the lower middle one for an even count: the n/2-th observation,
        # where the bucket quantile lands).
        exact = statistics.median_low(ttfts)
        bounds = s.http.get("/console/api/status").json()["latency_ms"]["ttft"]["bounds"]
        lo = max([0] + [b for b in bounds if b < exact])
        hi = min([b for b in bounds if b >= exact] or [float("inf")])
        p50 = tile(browser, "ttft-p50")
        assert p50 is not None and lo <= p50 <= hi, (p50, exact, lo, hi, n)
        # Charts were drawn from the readings.
        assert browser.find_elements(By.CSS_SELECTOR, "#chart-throughput path.series")
        assert tile(browser, "kv-high-water") > 0


def write_spec(path, concurrency, seed=5):
    spec = {"inference_benchmark": "console", "traffic": {
        "concurrency": concurrency, "arrival": "closed_loop", "requests_per_cell": 6,
        "length_buckets": [[20, 60]], "output_buckets": [[8, 16]]},
        "controls": {"warmup_requests": 1, "random_seed": seed}, "cost": {"usd_per_hour": 1.0},
        "report": ["ttft_ms", "tpot_ms", "p99_ms", "cost_per_success"]}
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def test_reports_render_and_two_give_the_ticket_of_bench_compare(tokenmill_bin, tiny, browser, artifacts, tmp_path):
    with Server(tokenmill_bin, tiny, "--model-alias", "tiny") as s:
        same = write_spec(tmp_path / "spec.yaml", [1, 2])
        other = write_spec(tmp_path / "other.yaml", [1, 2], seed=6)
        for name, spec in (("a", same), ("b", same), ("c", other)):
            run_tokenmill(tokenmill_bin, "bench", "serve", spec, "--url", s.base, "-o", str(tmp_path / name))
        open_console(browser, s, "reports")
        by_id(browser, "dir-a").send_keys(str(tmp_path / "a"))
        wait(browser, lambda d: by_id(d, "report-a").get_attribute("data-loaded") == "true", what="report A")
        report_a = by_id(browser, "report-a")
        a = json.loads((tmp_path / "a" / "report.json").read_text())
        rows = report_a.find_elements(By.XPATH, ".//th[text()='cells' or .='cell']/ancestor::table//tbody/tr")
        assert len(rows) == len(a["cells"])
        assert a["benchmark"] in report_a.text
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#ttft-cdf-a path.series"), what="the TTFT CDF")
        images = report_a.find_elements(By.TAG_NAME, "img")
        assert len(images) == len(a["plots"])
        wait(browser, lambda d: all(i.get_property("naturalWidth") > 0 for i in images), what="the plots to load")

        by_id(browser, "change").send_keys("nothing (same server twice)")
        set_value(browser, "slice", "short prompts")
        by_id(browser, "file-b").send_keys(str(tmp_path / "b" / "report.json"))
        wait(browser, lambda d: d.find_elements(By.ID, "ticket-decision"), what="the ticket")
        decision = by_id(browser, "ticket-decision").text.lower()
        cli = run_tokenmill(tokenmill_bin, "bench", "compare", str(tmp_path / "a" / "report.json"),
                            str(tmp_path / "b" / "report.json"), "--change", "nothing (same server twice)",
                            "--slice", "short prompts").stdout
        ticket = yaml.safe_load(cli)["optimization_ticket"]
        assert decision == ticket["decision"]
        assert by_id(browser, "ticket-reason").text == ticket["reason"]
        assert no_sideways_scroll(browser) <= 0, "two reports side by side overflow the page"
        page_yaml = yaml.safe_load(browser.find_element(By.CSS_SELECTOR, "#ticket pre").get_attribute("textContent"))
        assert page_yaml == yaml.safe_load(cli)
        shot(browser, artifacts, "console-reports")

        # Another traffic shape: no ticket, and the reason.
        by_id(browser, "file-b").send_keys(str(tmp_path / "c" / "report.json"))
        wait(browser, lambda d: d.find_elements(By.ID, "ticket-error"), what="the refusal")
        assert "traffic" in by_id(browser, "ticket-error").text
        # Not a report at all.
        (tmp_path / "junk.json").write_text('{"x": 1}')
        by_id(browser, "file-b").send_keys(str(tmp_path / "junk.json"))
        wait(browser, lambda d: "not a bench serve report" in by_id(d, "report-b").text, what="the file error")


def test_api_key_is_asked_once_and_a_wrong_one_is_refused_clearly(tokenmill_bin, slow, browser, artifacts):
    with Server(tokenmill_bin, slow, "--chat-template", "chatml", "--model-alias", "slow",
                "--api-key", "sk-console-test") as s:
        browser.get(f"{s.base}/#chat")
        browser.execute_script("sessionStorage.clear()")
        browser.refresh()
        dialog = wait(browser, lambda d: d.find_element(By.ID, "key-dialog").get_property("open") and
                      d.find_element(By.ID, "key-dialog"), what="the key dialog")
        by_id(browser, "key-input").send_keys("sk-wrong")
        by_id(browser, "key-submit").click()
        wait(browser, lambda d: by_id(d, "key-error").is_displayed(), what="the refusal")
        assert "refused" in by_id(browser, "key-error").text and "incorrect API key" in by_id(browser, "key-error").text
        shot(browser, artifacts, "console-api-key")
        by_id(browser, "key-input").send_keys("sk-console-test")
        by_id(browser, "key-submit").click()
        wait(browser, lambda d: not dialog.get_property("open"), what="the dialog to close")
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"), what="the model list")
        wait(browser, lambda d: by_id(d, "server-badge").get_attribute("data-state") == "ready", what="the status")
        chat_once(browser, "Hi", 8)
        # Kept for the tab: a reload asks nothing.
        browser.refresh()
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"), what="the model list again")
        assert not by_id(browser, "key-dialog").get_property("open")
        # Cancelling with no key leaves a clear message, not a blank page.
        browser.execute_script("sessionStorage.clear()")
        browser.refresh()
        wait(browser, lambda d: d.find_element(By.ID, "key-dialog").get_property("open"), what="the key dialog")
        by_id(browser, "key-cancel").click()
        wait(browser, lambda d: by_id(d, "notice").is_displayed(), what="the notice")
        assert "API key" in by_id(browser, "notice").text
        assert s.metrics()["tokenmill_http_auth_failures_total"] >= 1


def test_keyboard_tabs_and_a_narrow_screen(tokenmill_bin, tiny, browser, artifacts):
    with Server(tokenmill_bin, tiny, "--model-alias", "tiny") as s:
        open_console(browser, s)
        tab = by_id(browser, "tab-chat")
        tab.send_keys(Keys.ARROW_RIGHT)
        wait(browser, lambda d: by_id(d, "panel-dashboard").is_displayed(), what="arrow key to open the dashboard")
        assert browser.switch_to.active_element == by_id(browser, "tab-dashboard")
        browser.switch_to.active_element.send_keys(Keys.END)
        wait(browser, lambda d: by_id(d, "panel-reports").is_displayed(), what="End to open reports")
        # Every form control has a label.
        unlabelled = browser.execute_script("""
            return [...document.querySelectorAll('input, select, textarea')]
              .filter(e => !e.labels || e.labels.length === 0).map(e => e.id);""")
        assert unlabelled == []
        try:
            browser.set_window_size(390, 844)
            for name in ("chat", "dashboard"):
                by_id(browser, f"tab-{name}").click()
                time.sleep(1.2)  # one dashboard reading
                overflow = no_sideways_scroll(browser)
                assert overflow <= 0, f"{name} scrolls sideways by {overflow} px on a phone-sized screen"
                shot(browser, artifacts, f"console-narrow-{name}")
        finally:
            browser.set_window_size(1280, 1000)


def test_no_console_serves_the_api_only(tokenmill_bin, tiny):
    with Server(tokenmill_bin, tiny, "--no-console") as s:
        assert s.http.get("/").status_code == 404
        assert s.http.get("/console/main.js").status_code == 404
        assert s.http.get("/health").status_code == 200
