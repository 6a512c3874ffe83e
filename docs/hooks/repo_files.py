"""mkdocs hook: links from a page to files of the repository outside ``docs/``.

The pages link to the repository's files relatively (``../examples/curl.toml``), so that the
links work where the Markdown is read as it is (GitHub). The site has no such files; this hook
copies each file a page links to into the site, under ``repo/`` (``repo/examples/curl.toml``),
and points the link there. A link to a file that does not exist is left as it is, and the strict
build fails on it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "repo"

# [text](target) and [text](target#anchor), outside code spans and blocks (see _prose)
LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")
FENCE = re.compile(r"^(```|~~~)")


def _prose(markdown: str) -> list[tuple[bool, str]]:
    """The text cut into (is prose, part): fenced code blocks are not prose."""
    parts: list[tuple[bool, str]] = []
    fence: str | None = None
    for line in markdown.splitlines(keepends=True):
        m = FENCE.match(line.lstrip())
        if fence is None and m:
            fence = m.group(1)
            parts.append((False, line))
        elif fence is not None:
            if line.lstrip().startswith(fence):
                fence = None
            parts.append((False, line))
        else:
            parts.append((True, line))
    return parts


def outside_target(page_uri: str, target: str, docs_dir: Path) -> str | None:
    """The repository path a page's link names when it leaves ``docs/`` for a file that exists,
    else None."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
        return None
    docs = docs_dir.resolve()
    path = (docs / posixpath.dirname(page_uri) / target).resolve()
    if path.is_relative_to(docs) or not path.is_relative_to(ROOT) or not path.is_file():
        return None
    return path.relative_to(ROOT).as_posix()


def repo_links(page_uri: str, markdown: str, docs_dir: Path) -> list[str]:
    """Every repository file outside ``docs/`` that a page links to."""
    out = []
    for prose, part in _prose(markdown):
        if prose:
            for m in LINK.finditer(part):
                found = outside_target(page_uri, m.group(2), docs_dir)
                if found is not None:
                    out.append(found)
    return out


def rewrite(page_uri: str, markdown: str, docs_dir: Path) -> str:
    """A page's links to repository files pointed at their copies under ``repo/``."""

    def sub(m: re.Match[str]) -> str:
        found = outside_target(page_uri, m.group(2), docs_dir)
        if found is None:
            return m.group(0)
        new = posixpath.relpath(f"{PREFIX}/{found}", posixpath.dirname(page_uri) or ".")
        return f"{m.group(1)}{new}{m.group(3) or ''}{m.group(4)}"

    return "".join(LINK.sub(sub, part) if prose else part for prose, part in _prose(markdown))


def on_files(files: Files, config: MkDocsConfig, **kwargs: Any) -> Files:
    docs_dir = Path(config.docs_dir)
    wanted: set[str] = set()
    for file in files.documentation_pages():
        wanted.update(repo_links(file.src_uri, Path(file.abs_src_path or "").read_text(), docs_dir))
    for path in sorted(wanted):
        files.append(File.generated(config, f"{PREFIX}/{path}", abs_src_path=str(ROOT / path)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, **kwargs: Any) -> str:
    return rewrite(page.file.src_uri, markdown, Path(config.docs_dir))
