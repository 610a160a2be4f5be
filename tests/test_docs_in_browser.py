"""The built site's performance page, opened in headless Chromium, shows its charts.

The site is built as CI builds it (`mkdocs build --strict`) and served on a loopback
port. A check page, written into the built copy only, frames the performance page and,
once the browser has loaded everything, writes what it found into its own DOM: each
image of the framed page with `naturalWidth` and `naturalHeight`, which are 0 for an
image the browser could not fetch or decode. Chromium prints that DOM (`--dump-dom`). A
missing image on the check page itself shows the check can tell a broken one.

Debian's `chromium` runs it; without it the test is skipped, unless
`CHUTE_REQUIRE_CHROMIUM` is set (.ci/run sets it after installing chromium).
"""

from __future__ import annotations

import functools
import html
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHARTS = ["img/performance-comparison.svg", "img/performance-history.svg", "img/asv-targets.svg"]
CHECK_PAGE = """<!doctype html>
<meta charset="utf-8">
<pre id="result">not loaded</pre>
<img id="control" src="img/no-such-chart.svg" alt="">
<iframe id="page" src="performance/" width="1280" height="30000"></iframe>
<script>
  window.addEventListener("load", () => {
    const page = document.getElementById("page").contentDocument;
    const size = (img) => ({width: img.naturalWidth, height: img.naturalHeight});
    const images = [...page.images].map((img) => ({
      src: img.src, alt: img.alt, ...size(img)}));
    document.getElementById("result").textContent = JSON.stringify({
      title: page.title, images, control: size(document.getElementById("control"))});
  });
</script>
"""

pytestmark = pytest.mark.slow


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CHUTE_REQUIRE_CHROMIUM"):
            pytest.fail("CHUTE_REQUIRE_CHROMIUM is set but chromium is not on PATH")
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does)")
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    browser = chromium()
    folder = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "docs" / "mkdocs.yml"), "--site-dir", str(folder)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    (folder / "chart-check.html").write_text(CHECK_PAGE)
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield browser, f"http://127.0.0.1:{server.server_address[1]}/", folder
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # Not on the test's output.
        pass


def dump_dom(browser, url, profile):
    result = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
         "--virtual-time-budget=15000", "--dump-dom", url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_the_performance_page_loads_every_chart_in_chromium(site, tmp_path):
    browser, url, _ = site
    dom = dump_dom(browser, url + "chart-check.html", tmp_path / "profile")
    found = re.search(r'<pre id="result">(.*?)</pre>', dom, re.DOTALL)
    assert found, dom[-2000:]
    assert found.group(1) != "not loaded", "the check page's script did not run"
    report = json.loads(html.unescape(found.group(1)))
    assert report["title"].startswith("Performance")
    assert report["control"] == {"width": 0, "height": 0}  # A missing image reads as such.
    shown = {image["src"].removeprefix(url): image for image in report["images"]}
    assert set(CHARTS) <= set(shown), shown
    for image in report["images"]:
        assert image["width"] > 0 and image["height"] > 0, f"not loaded: {image['src']}"
    for chart in CHARTS:
        assert len(shown[chart]["alt"].split()) >= 20, f"{chart} has no description"
