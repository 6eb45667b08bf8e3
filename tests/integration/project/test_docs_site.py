"""The documentation site: it builds in strict mode with no warning, and in headless Chromium its
home page and a benchmark page render, the benchmark plots load, and nothing is fetched from
anywhere but the site itself."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

import pytest
from helpers.docs import build_site
from PIL import Image
from playwright.sync_api import Browser, Page, sync_playwright

pytestmark = pytest.mark.xdist_group("docs_site")

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's chromium, which `make test` installs (playwright's own browsers need a download)."""
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
MIN_COLOURS = 100
"""A rendered page's anti-aliased text, header and plots give hundreds to thousands; a blank one, one."""


class QuietHandler(SimpleHTTPRequestHandler):
    """Serves the site without a log line per request."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The site, built once for this module's tests, and how its build went."""
    site = tmp_path_factory.mktemp("site")
    return site, build_site(site)


@pytest.fixture(scope="module")
def server(build: tuple[Path, subprocess.CompletedProcess[str]]) -> Iterator[str]:
    """The built site served on 127.0.0.1; yields its root URL."""
    site, built = build
    assert built.returncode == 0, built.stderr
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(site)))
    Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless, driven by playwright for this module's tests."""
    if not CHROMIUM.exists():
        pytest.fail(f"chromium is not installed at {CHROMIUM}; `make test` installs it")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield chromium
        chromium.close()


def visit(browser: Browser, url: str) -> tuple[Page, list[str]]:
    """``url`` loaded until the network is idle; the page and the URL of every request it made."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(url, wait_until="networkidle")
    return page, requests


def heading(page: Page) -> str:
    """The page's h1, without the permalink sign after it."""
    return page.locator("article h1").inner_text().removesuffix("¶")


def colours(page: Page, png: Path) -> int:
    """How many distinct colours a screenshot of the page's viewport, saved to ``png``, holds."""
    page.screenshot(path=str(png), animations="disabled")
    with Image.open(png) as image:
        counts = image.convert("RGB").getcolors(maxcolors=1 << 24)
    assert counts is not None
    return len(counts)


def test_site_builds_strictly(build: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    """``mkdocs build --strict``: a broken link, anchor or API reference fails it."""
    site, built = build
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    assert (site / "index.html").exists() and (site / "bench" / "results" / "compare_delete.png").exists()


def test_home_page_renders(browser: Browser, server: str, tmp_path: Path) -> None:
    page, requests = visit(browser, server)
    assert page.title() == "castable"
    assert heading(page) == "castable"
    assert page.get_by_role("link", name="The Python API").count() > 0
    assert colours(page, tmp_path / "home.png") > MIN_COLOURS
    assert all(url.startswith(server) for url in requests), requests


def test_benchmark_page_plots_load(browser: Browser, server: str, tmp_path: Path) -> None:
    page, requests = visit(browser, f"{server}benchmarks/")
    assert page.title() == "Benchmarks - castable"
    assert heading(page) == "Benchmarks"
    images = page.evaluate("Array.from(document.images, i => [i.src, i.complete && i.naturalWidth > 0])")
    assert len(images) >= 3 and all(loaded for _, loaded in images), images
    page.locator("article img").first.scroll_into_view_if_needed()
    assert colours(page, tmp_path / "benchmarks.png") > MIN_COLOURS
    assert all(url.startswith(server) for url in requests), requests


def test_the_404_page_renders_served_and_opened_from_the_files(
    browser: Browser, server: str, build: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """mkdocs roots the 404 page's links at ``/`` (it is served at any depth), which from the
    files is the file system's root: its stylesheets and links are made relative, and rooted
    again by a ``<base>`` when served."""
    site, _ = build
    for url, within in ((f"{server}404.html", server), ((site / "404.html").as_uri(), site.as_uri())):
        page, requests = visit(browser, url)
        assert page.evaluate("document.styleSheets.length") >= 2, url
        assert colours(page, tmp_path / "404.png") > MIN_COLOURS, url
        assert all(r.startswith(within) for r in requests), requests
        home = page.evaluate("document.querySelector('a.md-header__button.md-logo').href")
        assert home.startswith(within), home
