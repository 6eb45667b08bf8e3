"""mkdocs hooks: the site serves the benchmarks' reports and plots from bench/results/ itself,
so they have one copy, and the pages' links to them, written as GitHub resolves them, reach it."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.pages import Page

RESULTS = "bench/results"
"""Served at the same path in the site as in the repository."""
SERVED = {".md", ".png"}
"""The reports and their plots; not bench/results/tmp/, a benchmark's scratch space."""
TARGET = re.compile(r"(\]\()([^)\s#]+)")
"""A Markdown link's or image's target up to its anchor."""


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add every report and plot of bench/results/ to the site, at bench/results/..., reached
    by the pages' links rather than the navigation."""
    root = Path(config.config_file_path).parent
    for path in sorted((root / RESULTS).rglob("*")):
        if path.suffix in SERVED and "tmp" not in path.relative_to(root / RESULTS).parts:
            uri = path.relative_to(root).as_posix()
            files.append(File.generated(config, uri, abs_src_path=str(path), inclusion=InclusionLevel.NOT_IN_NAV))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Point a page's links into bench/results/ (relative to the page in the repository, e.g.
    ``../bench/results/compare.md`` from docs/) at the site's copy of that folder."""
    if page.file.generated_by is not None:  # a report: its links stay within bench/results/
        return markdown
    folder = posixpath.dirname(page.file.src_uri)
    in_repository = posixpath.join("docs", folder)

    def served(link: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join(in_repository, link.group(2)))
        if not target.startswith(f"{RESULTS}/"):
            return link.group(0)
        return link.group(1) + posixpath.relpath(target, folder or ".")

    return TARGET.sub(served, markdown)


ROLE = re.compile(r":(?:meth|class|mod|func|attr|data|exc|obj):<code>(~?)([^<]*)</code>")
"""A Sphinx role in a docstring (``:meth:`x```), as the Markdown renderer leaves it."""


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """The docstrings' Sphinx roles as the code they name (``~`` keeps only the last part of a
    dotted name, as Sphinx does): mkdocstrings' Sphinx style reads their fields, not their roles."""
    return ROLE.sub(lambda m: f"<code>{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}</code>", html)


ROOTED = re.compile(r'((?:href|src)=")/(?!/)')
"""A link from the site's root (``href="/assets/..."``), as mkdocs writes them in the 404 page."""
BASE = "<script>if (location.protocol !== 'file:') document.write('<base href=\"/\">');</script>"
"""Served, the 404 page answers at any depth, so its links resolve from the site's root."""


def on_post_template(output: str, template_name: str, config: MkDocsConfig) -> str:
    """The 404 page with links relative to itself (it lies at the site's root), so that it also
    renders opened from the built files; served, a ``<base>`` set before any link keeps them rooted."""
    if template_name != "404.html":
        return output
    return ROOTED.sub(r"\1", output).replace("<head>", "<head>" + BASE, 1)
