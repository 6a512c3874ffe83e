"""The documentation: links resolve, shown output is real, the reference is generated whole.

- Every link of the README and of the pages under docs/ resolves: relative files, and anchors in
  Markdown files (as GitHub and the site make them), the generated reference pages included.
- Every ``console`` block is run (``$ `` lines) and what it shows checked against what the
  command prints now, figures masked (:func:`normalize`).
- The generated reference names every suite key, result field, workload kind, command and
  option, found here by walking the models and the parser directly, not through the generator.
- The README stays a front door and shows the commands that CI runs.
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pydantic import BaseModel

from tests.reporters import test_html

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"docs_hooks_{name}", DOCS / "hooks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


reference = _load("reference")


def markdown_files() -> list[Path]:
    pages = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)
    return [README, *pages]


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# ---- Markdown, read the way the links and examples need ------------------------------------------


FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w-]*)")


@dataclass
class Block:
    info: str
    lines: list[str]
    line_no: int  # of its opening fence


def split(text: str) -> tuple[list[tuple[int, str]], list[Block]]:
    """(prose lines with their numbers, fenced blocks)."""
    prose: list[tuple[int, str]] = []
    blocks: list[Block] = []
    current: Block | None = None
    fence = ""
    for no, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if current is None and m:
            fence, current = m.group(1), Block(m.group(2), [], no)
        elif current is not None and line.strip().startswith(fence) and not line.strip(fence[0]):
            blocks.append(current)
            current = None
        elif current is not None:
            current.lines.append(line)
        else:
            prose.append((no, line))
    return prose, blocks


LINK = re.compile(r"\]\(([^)\s]+)\)|^\s*\[[^\]]+\]:\s*(\S+)")
CODE_SPAN = re.compile(r"(`+).+?\1")


def links(text: str) -> list[tuple[int, str]]:
    out = []
    for no, line in split(text)[0]:
        for m in LINK.finditer(CODE_SPAN.sub("", line)):
            out.append((no, m.group(1) or m.group(2)))
    return out


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings (GitHub's and the site's: duplicates get -1,
    -2 on GitHub), its reference markers expanded as the site build does."""
    text = reference.expand(path.read_text())
    found: set[str] = set()
    for _, line in split(text)[0]:
        m = re.match(r"#{1,6} (.+?)\s*#*$", line)
        if m:
            slug = reference.slug(m.group(1))
            n = 0
            while (candidate := slug if n == 0 else f"{slug}-{n}") in found:
                n += 1
            found.add(candidate)
    return found


# ---- links ---------------------------------------------------------------------------------------


def broken_links(path: Path, text: str | None = None) -> list[str]:
    """What is wrong with each link of a Markdown file (``text``: its text, if not yet written)."""
    out = []
    for no, target in links(path.read_text() if text is None else text):
        where = f"{_name(path)}:{no}: {target}"
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        if file_part.startswith("/"):
            out.append(f"{where}: absolute path (use a relative link)")
            continue
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.is_file():
            out.append(f"{where}: no such file")
            continue
        if not dest.is_relative_to(ROOT):
            out.append(f"{where}: outside the repository")
            continue
        if anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            out.append(f"{where}: no anchor #{anchor} in {_name(dest)}")
    return out


def test_every_link_of_the_readme_and_the_pages_resolves() -> None:
    files = markdown_files()
    assert len(files) > 20 and (DOCS / "architecture.md") in files
    broken = [b for f in files for b in broken_links(f)]
    assert not broken, "\n".join(broken)


def test_the_link_check_finds_a_broken_file_and_a_broken_anchor() -> None:
    page = DOCS / "index.md"
    assert not broken_links(page)
    anchors_of_start = anchors(DOCS / "getting-started.md")
    assert "install-and-run" in anchors_of_start
    assert "no-such-heading" not in anchors_of_start
    text = "[a](getting-started.md#no-such-heading) [b](no-such-page.md) `[c](nowhere.md)`\n"
    found = broken_links(DOCS / "probe.md", text)
    assert [f.rsplit(": ", 1)[1] for f in found] == [
        "no anchor #no-such-heading in docs/getting-started.md",
        "no such file",
    ]


def test_the_readme_links_only_into_files_github_shows() -> None:
    for _, target in links(README.read_text()):
        if not re.match(r"^[a-z]+:", target):
            assert not target.startswith(("/", "..")), target


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in markdown_files()[1:]:
        assert f": {page.relative_to(DOCS).as_posix()}" in nav, f"{_name(page)} is not in the nav"


# ---- console examples ----------------------------------------------------------------------------


@dataclass
class Example:
    where: str
    command: str
    shown: list[str]


def examples() -> list[list[Example]]:
    """The commands of every console block, a block's in order (they share a directory)."""
    out = []
    for path in markdown_files():
        for block in split(path.read_text())[1]:
            if block.info != "console":
                continue
            commands: list[Example] = []
            lines = iter(block.lines)
            for line in lines:
                if line.startswith("$ "):
                    command = line[2:]
                    while command.endswith("\\"):
                        command = command[:-1] + next(lines).strip()
                    commands.append(Example(f"{_name(path)}:{block.line_no}", command, []))
                elif commands:
                    commands[-1].shown.append(line)
                else:
                    raise AssertionError(
                        f"{_name(path)}:{block.line_no}: a console block starts with '$ '"
                    )
            out.append(commands)
    return out


NUMBER = re.compile(r"\d[\d,]*(\.\d+)?(e[-+]?\d+)?")
VERDICT = re.compile(r"\b(faster|slower|same|more|less|unknown)\b\??")  # same?: a weak same
RULE = re.compile(r"[─━═]+")


WITHIN_NOISE = re.compile(r"\\?~0 \(within noise\)")
BOLD_FIGURE = re.compile(r"\*\*(-?[\d.,]+(?: ± [\d.,]+)?)\*\*")  # a figure beyond the noise


def normalize(line: str) -> str:
    """A line with what changes from run to run masked: figures (N), verdicts (V), the length of
    a table's rule, spacing, and a table row's leading numeric columns (a matrix point's values,
    printed on its group's first row only, whichever variant ranks first)."""
    line = WITHIN_NOISE.sub("N ± N", line)  # an overhead within the noise is a figure too
    line = BOLD_FIGURE.sub(r"\1", line)
    line = RULE.sub("─", NUMBER.sub("N", line))
    line = re.sub(r"(?<![\w.])-N", "N", line)  # a figure's sign (an overhead may fall below 0)
    line = VERDICT.sub("V", line)
    line = re.sub(r"(?<!\S)-(?!\S)", "N", line)  # a figure not measured
    line = " ".join(line.split())
    return re.sub(r"^(N )+", "", line)


def test_normalize_masks_figures_not_words() -> None:
    a = "       4         1   bind        411      2.50      9.00    19.82    21.50    28.12     0.39"
    b = "                     bind      1,203      0.98     10.01     -       21.50   128.12    10.39"
    assert normalize(a) == normalize(b) == "bind N N N N N N N"
    assert normalize("   4    1  default   165   1.00") != normalize("   4    1  bind   165   1.00")
    assert normalize(" ─────") == normalize(" ──") == "─"
    assert normalize("0.46 faster  0.39-0.56") == normalize("1.20 slower  1.1-1.3") == "V N-N"
    assert normalize("1.02 same?") == normalize("1.02 same") == "V"
    assert normalize("demo: rpyc thread binding · 4 cases") != normalize("demo: rpyc · 4 cases")
    assert (
        normalize("| 0.001 ± 0.001 | \\~0 (within noise) | 71 |")
        == normalize("| 0.001 ± 0.001 | 0.325 ± 0.091 | 71 |")
        == normalize("| 0.001 ± 0.000 | **-0.003 ± 0.001** | 71 |")
    )
    assert normalize("| **bold** |") != normalize("| bold |")


def _argv(command: str) -> list[str]:
    argv = shlex.split(command)
    if argv[0] == "rpcmeter":
        return [sys.executable, "-m", "rpcmeter", *argv[1:]]
    if argv[0] == "python":
        return [sys.executable, *argv[1:]]
    if argv[0] == "cat":  # a file the command before it wrote
        return argv
    raise AssertionError(f"a console example runs rpcmeter, python or cat, not {argv[0]!r}")


def run_example(example: Example, cwd: Path) -> tuple[int, list[str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("RPCMETER_STORE", "COLUMNS")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        _argv(example.command),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, (proc.stdout + proc.stderr).splitlines()


EXAMPLES = examples()


def test_there_are_console_examples_in_the_readme_and_the_pages() -> None:
    wheres = {block[0].where.partition(":")[0] for block in EXAMPLES}
    assert "README.md" in wheres and any(w.startswith("docs/") for w in wheres)
    assert any(len(block) > 1 for block in EXAMPLES)


@pytest.mark.parametrize("block", EXAMPLES, ids=[b[0].where for b in EXAMPLES])
def test_console_example_shows_what_the_command_prints(
    block: list[Example], tmp_path: Path
) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    for example in block:
        status, printed = run_example(example, tmp_path)
        shown = [line for line in example.shown if line.strip() and line.strip() != "..."]
        assert shown, f"{example.where}: `{example.command}` shows no output"
        expected = 2 if any(line.startswith("rpcmeter: error:") for line in shown) else 0
        have = {normalize(line) for line in printed}
        missing = [line for line in shown if normalize(line) not in have]
        assert status == expected and not missing, (
            f"{example.where}: `{example.command}` exited {status} (expected {expected}); "
            "lines shown but not printed:\n"
            + "\n".join(missing)
            + "\n--- printed:\n"
            + "\n".join(printed)
        )


# ---- the generated reference ---------------------------------------------------------------------


def _fields(model: type[BaseModel], seen: set[type[BaseModel]]) -> list[str]:
    """Every field a model and the models in its fields take, by the name a file uses."""
    if model in seen:
        return []
    seen.add(model)
    out = []
    for name, info in model.model_fields.items():
        if info.exclude:
            continue
        out.append(info.alias or name)
        for inner in _models_in(info.annotation):
            out += _fields(inner, seen)
    return out


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _models_in(arg)]


def _keys(markdown: str) -> set[str]:
    return set(re.findall(r"^\| `([^`]+)` \|", markdown, flags=re.MULTILINE))


def test_the_suite_reference_names_every_key_kind_and_driver() -> None:
    from rpcmeter.drivers import REGISTRY, driver_class
    from rpcmeter.suite.model import Suite
    from rpcmeter.suite.workloads import KINDS

    text = reference.generated("suite")
    keys = _keys(text)
    fields = _fields(Suite, set())
    assert {"target", "load", "rate", "from", "server_cpus", "verify", "rtt_requests"} <= set(
        fields
    )
    assert set(fields) - keys == set()
    for kind, cls in KINDS.items():
        assert f"### `{kind}`" in text
        assert set(cls.field_names()) <= keys
    for driver in REGISTRY:
        assert f"### `{driver}`" in text
        section = text.split(f"### `{driver}`", 1)[1].split("\n### ", 1)[0]
        for key in driver_class(driver).option_keys or ():
            row = next(line for line in section.splitlines() if line.startswith(f"| `{key}` |"))
            meaning, example = row.split(" | ")[4:6]
            assert meaning and example.startswith(f"`{key} = "), row


def test_the_reference_picks_up_a_new_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import Field, create_model

    from rpcmeter.suite import model as suite_model

    load = create_model(
        "Load",
        __base__=suite_model.Load,
        brand_new_s=(float, Field(2.5, gt=0, description="a key added after the docs")),
    )
    suite = create_model(
        "Suite", __base__=suite_model.Suite, load=(load, Field(load(), description="the load"))
    )
    monkeypatch.setattr(suite_model, "Suite", suite)
    reference.generated.cache_clear()
    try:
        text = reference.generated("suite")
    finally:
        reference.generated.cache_clear()
    row = next(line for line in text.splitlines() if line.startswith("| `brand_new_s` |"))
    assert row == (
        "| `brand_new_s` | number | 2.5 | > 0 "
        "| a key added after the docs Example: `brand_new_s = 2.5`. |"
    )


def test_a_suite_key_without_a_description_fails_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pydantic import Field, create_model

    from rpcmeter.suite import model as suite_model

    suite = create_model("Suite", __base__=suite_model.Suite, mystery_s=(float, Field(1.0, gt=0)))
    monkeypatch.setattr(suite_model, "Suite", suite)
    reference.generated.cache_clear()
    try:
        with pytest.raises(
            reference.Undescribed, match=r"1 suite keys .*: \(top level\) mystery_s"
        ):
            reference.generated("suite")
    finally:
        reference.generated.cache_clear()


def test_a_driver_option_without_a_row_fails_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rpcmeter.suite import driver_options as driver_options

    monkeypatch.delitem(driver_options.OPTIONS, "nodelay")
    reference.generated.cache_clear()
    try:
        with pytest.raises(reference.Undescribed, match=r"driver options .*: rpyc\.nodelay$"):
            reference.generated("suite")
    finally:
        reference.generated.cache_clear()


def test_the_suite_reference_names_no_code_constants() -> None:
    """A reader sees what a key means, not the name of a constant in the code
    (``repeat`` once read "unset with 2+ variants: COMPARE_REPEAT")."""
    constants = {
        name
        for path in (ROOT / "src" / "rpcmeter").rglob("*.py")
        for name in re.findall(r"^([A-Z][A-Z0-9]*_[A-Z0-9_]+)\s*[:=]", path.read_text(), re.M)
    }
    assert "COMPARE_REPEAT" in constants
    words = set(re.findall(r"\b[A-Z][A-Z0-9_]+\b", reference.generated("suite")))
    assert words & constants == set()


def test_the_result_reference_names_every_field() -> None:
    from rpcmeter.model import Result

    fields = _fields(Result, set())
    assert {"schema_version", "cases", "latency", "p99_us", "server_us_per_request"} <= set(fields)
    assert set(fields) - _keys(reference.generated("result")) == set()


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_the_cli_reference_names_every_command_and_option() -> None:
    from rpcmeter.cli import build_parser

    text = reference.generated("cli")
    commands = _commands(build_parser())
    assert {"run", "report", "compare", "trend"} <= set(commands)
    for name, sub in commands.items():
        section = text.split(f"## `rpcmeter {name}`\n", 1)[1].split("\n## ", 1)[0]
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}`" in section, f"rpcmeter {name} {option}"
            if not action.option_strings:
                assert f"`{action.metavar or action.dest}`" in section, f"rpcmeter {name}"


def test_every_reference_marker_names_a_reference() -> None:
    markers = [
        (page, m.group(1))
        for page in markdown_files()
        for m in reference.MARKER.finditer(page.read_text())
    ]
    assert {name for _, name in markers} == set(reference.GENERATORS)
    with pytest.raises(KeyError, match="no reference named 'nope'"):
        reference.expand("<!-- reference: nope -->")


# ---- the README ----------------------------------------------------------------------------------

TEST_COMMAND = "python3 -m pip install -e '.[test]' && python3 -m pytest"


def test_the_readme_is_a_front_door_that_ci_keeps_true() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    assert "rpcmeter run" in text
    assert "python3 -m pip install -e '.[all]' && rpcmeter run" in text
    assert TEST_COMMAND in text
    ci = (ROOT / ".ci" / "run").read_text()
    assert TEST_COMMAND in ci
    assert "mkdocs build --strict" in ci


def test_links_to_repository_files_point_at_their_copies_in_the_site() -> None:
    repo_files = _load("repo_files")
    page = "protocols/rpyc.md"
    text = (
        "[study](../../examples/rpyc-thread-binding.toml) [gone](../../examples/gone.toml) "
        "[page](grpc.md#streaming-calls)\n"
        "```\n[in code](../../examples/curl.toml)\n```\n"
    )
    assert repo_files.repo_links(page, text, DOCS) == ["examples/rpyc-thread-binding.toml"]
    assert repo_files.rewrite(page, text, DOCS) == text.replace(
        "../../examples/rpyc-thread-binding.toml", "../repo/examples/rpyc-thread-binding.toml"
    )


# ---- sentence length ----------------------------------------------------------------------------

MEDIAN_WORDS = 16  # the most words the median sentence of docs/ may have
LONG_WORDS = 40  # a sentence over this many words is long ...
LONG_SHARE = 0.05  # ... and at most this share of sentences may be


def sentences(markdown: str) -> list[str]:
    """The prose sentences of a page: code blocks, tables and headings left out, inline code as
    one word, links as their text; fragments under three words are not sentences. The same
    count as the before-stop hook's (section 2c), regex for regex."""
    t = re.sub(r"```.*?```", "", markdown, flags=re.S)
    t = re.sub(r"^\s*[|#].*$", "", t, flags=re.M)
    t = re.sub(r"`[^`]*`", "X", t)
    t = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", t).replace("\n", " ")
    parts = re.split(r"(?<=[.!?:;])\s+(?=[A-Z(`])", t)
    return [" ".join(x.split()) for x in parts if len(x.split()) >= 3]


def test_sentences_splits_prose_and_skips_code_and_tables() -> None:
    text = (
        "# A heading that is long enough\n\nOne short sentence here. Another one: with a colon "
        "here.\n\n```\nNot. Prose. At. All.\n```\n\n| a | b. C d e |\n\nThe `code` counts "
        "as one word.\n"
    )
    assert sentences(text) == [
        "One short sentence here.",
        "Another one: with a colon here.",
        "The X counts as one word.",
    ]


def test_docs_sentences_are_short() -> None:
    """The median sentence of docs/ has at most 16 words and at most 5 % have over 40; on failure
    the longest sentences are listed page by page."""
    by_page = {
        _name(p): sentences(p.read_text(errors="ignore"))
        for p in sorted(DOCS.rglob("*.md"))
        if "hooks" not in p.relative_to(DOCS).parts
    }
    lengths = sorted(len(s.split()) for page in by_page.values() for s in page)
    assert lengths, "no prose found under docs/"
    median = statistics.median(lengths)
    share = sum(n > LONG_WORDS for n in lengths) / len(lengths)
    if median <= MEDIAN_WORDS and share <= LONG_SHARE:
        return
    worst: list[str] = []
    for page, found in by_page.items():
        longest = sorted((s for s in found if len(s.split()) > LONG_WORDS), key=len, reverse=True)
        if longest:
            worst.append(f"{page}: {len(longest)} over {LONG_WORDS} words")
            worst += [f"  ({len(s.split())}) {s[:160]}" for s in longest[:3]]
    pytest.fail(
        f"docs/ prose: median sentence {median:g} words (aim <= {MEDIAN_WORDS}), "
        f"{share:.0%} over {LONG_WORDS} (aim <= {LONG_SHARE:.0%}); the longest:\n"
        + "\n".join(worst)
    )


# ---- the built site in a browser ----------------------------------------------------------------

SHOTS_ENV = "RPCMETER_DOCS_SCREENSHOTS"  # a directory to keep the screenshots in
WIDTH = 1280


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as ``mkdocs build --strict`` makes it, from this checkout."""
    pytest.importorskip("mkdocs", reason="mkdocs is in the docs extra")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


chromium = test_html.chromium  # the headless Chromium fixture of the HTML report's tests

SEARCH_JS = """
(() => {
  const toggle = document.querySelector('#__search');
  const input = document.querySelector('input.md-search__input');
  toggle.checked = true;
  toggle.dispatchEvent(new Event('change'));
  input.value = %s;
  input.dispatchEvent(new Event('input', {bubbles: true}));
  input.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true}));
  return true;
})()
"""

# Every code block and table: its width, the width of what it holds, and whether it scrolls.
WIDTHS_JS = """
JSON.stringify({
  page: document.documentElement.scrollWidth,
  blocks: Array.from(document.querySelectorAll(
      '.md-typeset pre > code, .md-typeset__scrollwrap, .md-typeset table')).map(e => ({
    tag: e.tagName, text: e.textContent.slice(0, 60), client: e.clientWidth,
    scroll: e.scrollWidth, overflow: getComputedStyle(e).overflowX,
    clipped: e.closest('.md-typeset__scrollwrap, pre > code') === null
      && e.tagName === 'TABLE' && e.scrollWidth > e.clientWidth + 1,
  })),
})
"""


def _opened(ws_url: str, page_file: Path) -> test_html.Page:
    page = test_html.Page(ws_url)
    page.call(
        "Emulation.setDeviceMetricsOverride",
        width=WIDTH,
        height=900,
        deviceScaleFactor=1,
        mobile=False,
    )
    page.open(page_file.as_uri())
    return page


def test_search_works_on_the_site_opened_from_disk(site: Path, chromium: str) -> None:
    page = _opened(chromium, site / "index.html")
    try:
        page.value(SEARCH_JS % json.dumps("reflection"))
        found: list[str] = []
        for _ in range(200):  # at most 20 s
            found = page.value(
                "Array.from(document.querySelectorAll('.md-search-result__item > a'))"
                ".map(a => a.href)"
            )
            if found:
                break
            time.sleep(0.1)
        requested = page.requested()
    finally:
        page.close()
    assert any(href.startswith((site / "protocols/grpc.html").as_uri()) for href in found), found
    assert page.errors() == []
    # nothing from the network: every request went to a file of the site (or is inline)
    assert {u for u in requested if not u.startswith(("file:", "data:"))} == set()


@pytest.mark.parametrize(
    "name", ["index", "getting-started", "protocols/grpc", "reference/suite", "tutorial"]
)
def test_code_blocks_and_tables_are_whole_or_scroll_at_1280_px(
    site: Path, chromium: str, name: str, tmp_path: Path
) -> None:
    """At 1280 px nothing of a code block or a table is cut: each fits, or scrolls sideways; and
    the page itself is no wider than the window. A screenshot of each page is kept (in
    $RPCMETER_DOCS_SCREENSHOTS when set)."""
    page_file = site / f"{name}.html"
    if not page_file.exists():
        pytest.skip(f"{name}.md is not in this checkout")
    page = _opened(chromium, page_file)
    try:
        found = json.loads(page.value(WIDTHS_JS))
        shot = page.call("Page.captureScreenshot", format="png")["data"]
    finally:
        page.close()
    shots = Path(os.environ.get(SHOTS_ENV) or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    png = shots / f"{name.replace('/', '-')}-{WIDTH}.png"
    png.write_bytes(base64.b64decode(shot))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert found["page"] <= WIDTH, "the page is wider than the window"
    assert found["blocks"], f"{name}: no code block or table found"
    cut = [
        b
        for b in found["blocks"]
        if b["clipped"]
        or (b["scroll"] > b["client"] + 1 and b["overflow"] not in ("auto", "scroll"))
    ]
    assert cut == [], f"{name}: cut at {WIDTH} px: {cut[:3]}"
