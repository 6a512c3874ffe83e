"""mkdocs hook: the reference pages, generated from the code at every build.

A page holds a marker, ``<!-- reference: NAME -->``, and the build replaces it with the
reference NAME (:data:`GENERATORS`), so no key, field or option is ever documented by hand:

- ``suite``: every suite key, from the JSON schema of :class:`rpcmeter.suite.model.Suite`, then
  the workload kinds (:data:`rpcmeter.suite.workloads.KINDS`) and each driver's option names;
- ``result``: every field of the result document, from the JSON schema of
  :class:`rpcmeter.model.Result`;
- ``cli``: every command and option, from :func:`rpcmeter.cli.build_parser`.

A key added to a model, a workload kind or a driver, or a command or option added to the parser,
shows up at the next build. A field's description is its ``Field(description=...)`` when it has
one, else the comment at the end of its line in the model's source; a model's is its docstring.

The pages build from the ``src/`` beside this file (not from whatever rpcmeter is installed), so
a worktree's docs describe that worktree's code.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

MARKER = re.compile(r"<!-- reference: ([a-z_]+) -->")

Schema = dict[str, Any]


# ---- text ---------------------------------------------------------------------------------------


def rst_to_md(text: str) -> str:
    """A docstring's reStructuredText inline markup as Markdown (roles, double backticks)."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def paragraph(text: str) -> str:
    """A docstring as Markdown paragraphs: each paragraph's lines joined, indented (literal)
    blocks left out."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", inspect.cleandoc(text)):
        lines = block.splitlines()
        if not lines or lines[0].startswith(" "):
            continue
        text = " ".join(line.strip() for line in lines)
        out.append(rst_to_md(text[:-1] if text.endswith("::") else text))
    return "\n\n".join(out)


def cell(text: str) -> str:
    """Text for one table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def toml_value(value: Any) -> str:
    """A default as it is written in a suite file."""
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float) and value.is_integer():
        return f"{value:.1f}"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return str(value)


def number(value: float) -> str:
    """A bound: whole numbers in full with thousands separators, others as they are."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def json_value(value: Any) -> str:
    return json.dumps(value)


def slug(text: str) -> str:
    """The anchor GitHub and the site (``pymdownx.slugs``, lower case) give a heading."""
    text = re.sub(r"</?[^>]*>", "", text).strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


# ---- JSON schema -> tables ----------------------------------------------------------------------


@dataclass
class Section:
    """One model, documented under the first path at which it is met."""

    model: str  # the $defs name
    path: str  # how a reader names it: "[load]", "cases[].cpu"
    heading: str = ""
    rows: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    description: str = ""
    extra: bool = False  # keys beyond those listed are allowed
    children: list[Section] = field(default_factory=list)


class SchemaDoc:
    """Tables of a JSON schema's models, one section per model, walked from the root.

    ``child`` names a field's path from its parent's (TOML tables for a suite, dotted JSON paths
    for the result document)."""

    def __init__(
        self,
        schema: Schema,
        root_path: str,
        child: Callable[[str, str, str], str],
        value: Callable[[Any], str],
        comments: dict[str, dict[str, str]],
        opaque: dict[str, str] | None = None,
    ) -> None:
        opaque = opaque or {}
        self.defs: dict[str, Schema] = schema.get("$defs", {})
        self.child = child
        self.value = value
        self.comments = comments
        self.placed: dict[str, Section] = {}
        self.undescribed: list[str] = []  # "path key" of every field without a description
        self.opaque = opaque  # models whose keys are documented elsewhere: (path, text)
        self.root = Section(model=schema.get("title", "root"), path=root_path)
        # breadth first, so that a model is documented under its shortest path ([placement],
        # not [variants.NAME.placement]); printed depth first, each under its parent
        queue = [(self.root, schema)]
        while queue:
            section, model = queue.pop(0)
            queue += self._fill(section, model)
        self.sections: list[Section] = []
        self._order(self.root)

    def _order(self, section: Section) -> None:
        self.sections.append(section)
        for child in section.children:
            self._order(child)

    def _ref(self, s: Schema) -> str | None:
        ref = s.get("$ref")
        return ref.rsplit("/", 1)[1] if isinstance(ref, str) else None

    def _models_in(self, s: Schema, kind: str = "") -> Iterator[tuple[str, str]]:
        """The models a field's schema holds, with how: "" (the value), "{}" (a table of them),
        "[]" (a list of them)."""
        name = self._ref(s)
        if name is not None:
            if self.defs[name].get("type") == "object" and "properties" in self.defs[name]:
                yield name, kind
            return
        for option in s.get("anyOf", []):
            yield from self._models_in(option, kind)
        if isinstance(s.get("additionalProperties"), dict):
            yield from self._models_in(s["additionalProperties"], "{}")
        if isinstance(s.get("items"), dict):
            yield from self._models_in(s["items"], "[]")

    def _fill(self, section: Section, model: Schema) -> list[tuple[Section, Schema]]:
        """A section's rows; the models first met in it, to fill next."""
        section.heading = f"`{section.path}`"
        section.description = paragraph(model.get("description", ""))
        if section.model in self.opaque:
            section.description = self.opaque[section.model]
            return []
        section.extra = model.get("additionalProperties") is True
        required = set(model.get("required", []))
        new: list[tuple[Section, Schema]] = []
        for key, s in model.get("properties", {}).items():
            links = []
            for name, how in self._models_in(s):
                if name not in self.placed:
                    child = Section(model=name, path=self.child(section.path, key, how))
                    self.placed[name] = child
                    section.children.append(child)
                    new.append((child, self.defs[name]))
                path = self.placed[name].path
                links.append(f"[`{path}`](#{slug('`' + path + '`')})")
            kind = self.type_of(s)
            if links:
                kind = kind + " (" + ", ".join(links) + ")"
            if key in required:
                default = "required"
            elif "default" not in s or (links and isinstance(s["default"], dict)):
                default = ""  # a table's defaults are its own keys'
            else:
                default = self.value(s["default"])
            comment = self.comments.get(section.model, {}).get(key, "")
            description = s.get("description") or comment
            if not description:
                self.undescribed.append(f"{section.path or '(top level)'} {key}")
            example = self.example(key, s, default)
            if example:
                description = f"{description} Example: `{example}`."
            section.rows.append(
                (
                    f"`{key}`",
                    cell(kind),
                    cell(default),
                    cell(self.limits(s)),
                    cell(rst_to_md(description)),
                )
            )
        return new

    def example(self, key: str, s: Schema, default: str) -> str:
        """``key = value`` from the field's first example, else from a default that says
        something (not none, not empty); "" when neither."""
        if s.get("examples"):
            return f"{key} = {self.value(s['examples'][0])}"
        if default and default not in ("required", "(none)", '""', "[]", "{}"):
            return f"{key} = {default}"
        return ""

    def type_of(self, s: Schema) -> str:
        name = self._ref(s)
        if name is not None:
            return (
                "table"
                if self.defs[name].get("type") == "object"
                else self.type_of(self.defs[name])
            )
        if "anyOf" in s:
            kinds = [self.type_of(o) for o in s["anyOf"] if o.get("type") != "null"]
            out = " or ".join(dict.fromkeys(kinds))
            return out + (" or null" if any(o.get("type") == "null" for o in s["anyOf"]) else "")
        if "enum" in s:
            return " or ".join(json.dumps(v) for v in s["enum"])
        if "const" in s:
            return json.dumps(s["const"])
        t = s.get("type")
        if t == "array":
            items = s.get("items")
            return f"list of {self.type_of(items)}" if isinstance(items, dict) and items else "list"
        if t == "object":
            extra = s.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                return f"table of {self.type_of(extra)}"
            return "table"
        names = {"integer": "integer", "number": "number", "string": "string", "boolean": "boolean"}
        return names.get(str(t), "any JSON value")

    def limits(self, s: Schema) -> str:
        """Bounds on a value (the first option of a union that has any)."""
        for option in [s, *s.get("anyOf", [])]:
            out = []
            for key, sign in (
                ("minimum", "≥"),
                ("exclusiveMinimum", ">"),
                ("maximum", "≤"),
                ("exclusiveMaximum", "<"),
                ("minLength", "length ≥"),
                ("maxLength", "length ≤"),
                ("minItems", "items ≥"),
                ("maxItems", "items ≤"),
            ):
                if key in option:
                    out.append(f"{sign} {number(option[key])}")
            if out:
                return ", ".join(out)
        return ""

    def markdown(self, level: int = 2) -> str:
        out: list[str] = []
        for section in self.sections:
            out.append(f"{'#' * level} {section.heading}")
            out.append("")
            if section.description:
                out += [section.description, ""]
            if section.rows:
                out.append("| key | type | default | limits | description |")
                out.append("| --- | --- | --- | --- | --- |")
                out += ["| " + " | ".join(row) + " |" for row in section.rows]
                out.append("")
            if section.extra:
                out += ["Keys beyond these are allowed and kept.", ""]
        return "\n".join(out)


def field_comments(*classes: type) -> dict[str, dict[str, str]]:
    """Each class's fields' end-of-line comments in its source (``name: type = x  # why``)."""
    out: dict[str, dict[str, str]] = {}
    for cls in classes:
        try:
            source = inspect.getsource(cls)
        except (OSError, TypeError):
            continue
        found = re.findall(r"^    (\w+): [^#\n]*#\s*(.+)$", source, flags=re.MULTILINE)
        out[cls.__name__] = dict(found)
    return out


def _classes_of(module: Any) -> list[type]:
    return [v for v in vars(module).values() if inspect.isclass(v)]


# ---- the three references -----------------------------------------------------------------------


def _toml_child(parent: str, key: str, how: str) -> str:
    inner = parent.strip("[]")
    name = f"{inner}.{key}" if inner else key
    if how == "{}":
        name += ".NAME"
    elif how == "[]":
        name = f"[{name}]"
    return f"[{name}]"


def _json_child(parent: str, key: str, how: str) -> str:
    name = f"{parent}.{key}" if parent else key
    return name + {"{}": ".NAME", "[]": "[]"}.get(how, "")


def suite_reference() -> str:
    from pydantic import TypeAdapter

    from rpcmeter.net import tls as tls
    from rpcmeter.suite import model as suite_model
    from rpcmeter.suite import workloads as workloads

    schema = suite_model.Suite.model_json_schema(by_alias=True, mode="serialization")
    comments = field_comments(*_classes_of(suite_model), *_classes_of(tls))
    opaque = {"Options": "Each driver reads its own keys: see [Driver options](#driver-options)."}
    doc = SchemaDoc(schema, "", _toml_child, toml_value, comments, opaque)
    doc.sections[0].heading = "Top level"
    out = [doc.markdown()]
    undescribed = list(doc.undescribed)

    out += ["## Workload kinds", ""]
    out.append(
        "A workload's `kind` (default: the workload's name) and the parameters it takes; a "
        "`[matrix]` key of the same name varies one."
    )
    out.append("")
    kind_comments = field_comments(*_classes_of(workloads))
    for kind, cls in workloads.KINDS.items():
        out += [f"### `{kind}`", ""]
        text = cls.__doc__ or ""
        # a dataclass without a docstring gets its signature as one
        if (
            text
            and not text.startswith(cls.__name__ + "(")
            and text != workloads.WorkloadParams.__doc__
        ):
            out += [paragraph(text), ""]
        s = TypeAdapter(cls).json_schema(mode="serialization")
        params = SchemaDoc(s, kind, _toml_child, toml_value, kind_comments)
        undescribed += params.undescribed
        rows = params.sections[0].rows
        if rows:
            out.append("| parameter | type | default | limits | description |")
            out.append("| --- | --- | --- | --- | --- |")
            out += ["| " + " | ".join(row) + " |" for row in rows]
        else:
            out.append("No parameters.")
        out.append("")

    out += driver_options()
    if undescribed:
        raise Undescribed("suite keys", undescribed)
    return "\n".join(out)


class Undescribed(Exception):
    """Keys the reference cannot describe: the docs build stops, naming them."""

    def __init__(self, what: str, keys: list[str]) -> None:
        super().__init__(
            f"{len(keys)} {what} without a description (give each a Field(description=...), "
            f"a line comment, a help text or a row in rpcmeter.suite.driver_options): "
            + ", ".join(keys)
        )


def driver_options() -> list[str]:
    """Each built-in driver's options, from its ``option_keys`` and the meanings in
    :mod:`rpcmeter.suite.driver_options` (Undescribed for a key with no row there)."""
    from rpcmeter.drivers import REGISTRY, driver_class
    from rpcmeter.suite.driver_options import option_doc

    out = ["## Driver options", ""]
    out.append(
        "The keys of `options` (in `[target]` or a variant) that each built-in driver and its "
        "built-in server read. Any other key is a suite error. A variant's options go over the "
        "target's."
    )
    out.append("")
    missing: list[str] = []
    for name in REGISTRY:
        out += [f"### `{name}`", ""]
        try:
            cls = driver_class(name)
        except KeyError as exc:  # its protocol library is not installed where the docs build
            out += [cell(str(exc).strip(chr(39))), ""]
            continue
        keys = cls.option_keys
        if keys is None:
            out += ["Any key (not checked).", ""]
            continue
        if not keys:
            out += ["No options.", ""]
            continue
        out.append("| option | type | default | allowed | meaning | example |")
        out.append("| --- | --- | --- | --- | --- | --- |")
        for key in sorted(keys):
            doc = option_doc(name, key)
            if doc is None:
                missing.append(f"{name}.{key}")
                continue
            out.append(
                f"| `{key}` | {cell(doc.type)} | {cell(doc.default)} | {cell(doc.allowed)} "
                f"| {cell(doc.meaning)} | `{cell(key + ' = ' + doc.example)}` |"
            )
        out.append("")
    if missing:
        raise Undescribed("driver options", missing)
    return out


def result_reference() -> str:
    from rpcmeter import model

    schema = model.Result.model_json_schema(mode="serialization")
    doc = SchemaDoc(schema, "", _json_child, json_value, field_comments(*_classes_of(model)))
    doc.sections[0].heading = "The document"
    return doc.markdown()


USAGE_WIDTH = 76  # what fits the page's column


def _option_name(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(f"`{o}`" for o in action.option_strings)
        if action.nargs != 0:
            metavar = action.metavar or (
                "{" + ",".join(map(str, action.choices)) + "}"
                if action.choices
                else action.dest.upper()
            )
            names += f" `{metavar}`"
        return names
    return f"`{action.metavar or action.dest}`"


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    params = {**vars(action), "prog": parser.prog}
    params = {k: getattr(v, "__name__", v) for k, v in params.items() if v is not argparse.SUPPRESS}
    if params.get("choices") is not None:
        params["choices"] = ", ".join(str(c) for c in params["choices"])
    return str(action.help) % params


def _command_doc(parser: argparse.ArgumentParser, level: int, nested: bool = True) -> list[str]:
    """A command's usage, description and argument tables; with ``nested``, its subcommands too
    (``COMMAND`` in its table, then ``rpcmeter grpc list`` under a heading one level down)."""
    usage = argparse.HelpFormatter(parser.prog, width=USAGE_WIDTH)  # not the terminal's width
    usage.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    out = ["```text", usage.format_help().strip(), "```", ""]
    if parser.description:
        out += [parser.description, ""]
    for group in parser._action_groups:
        actions = [
            a
            for a in group._group_actions
            if not isinstance(a, argparse._HelpAction)
            and (nested or not isinstance(a, argparse._SubParsersAction))
        ]
        if not actions:
            continue
        title = group.title or "arguments"
        out += [f"{'#' * (level + 1)} {title.capitalize()}", ""]
        out += ["| argument | default | description |", "| --- | --- | --- |"]
        for a in actions:
            default = (
                "" if a.default in (None, False, argparse.SUPPRESS) or a.nargs == 0 else a.default
            )
            if isinstance(default, list) and not default:
                default = ""
            shown = f"`{default}`" if default != "" else ""
            out.append(f"| {cell(_option_name(a))} | {cell(shown)} | {cell(_help(parser, a))} |")
        out.append("")
    for _name, help_text, sub in _subcommands(parser) if nested else []:
        out += [f"{'#' * (level + 1)} `{sub.prog}`", ""]
        if help_text:
            out += [help_text[0].upper() + help_text[1:] + ".", ""]
        out += _command_doc(sub, level + 1)
    return out


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((name, helps.get(name, ""), sub))
    return out


def cli_reference() -> str:
    from rpcmeter.cli import build_parser

    parser = build_parser()
    commands = _subcommands(parser)
    out = ["| command | what it does |", "| --- | --- |"]
    for name, help_text, _ in commands:
        out.append(f"| [`rpcmeter {name}`](#{slug('rpcmeter ' + name)}) | {cell(help_text)} |")
    out.append("")
    out += ["## `rpcmeter`", ""]
    out += _command_doc(parser, 2, nested=False)
    for name, help_text, sub in commands:
        out += [f"## `rpcmeter {name}`", ""]
        if help_text:
            out += [help_text[0].upper() + help_text[1:] + ".", ""]
        out += _command_doc(sub, 2)
    return "\n".join(out)


GENERATORS: dict[str, Callable[[], str]] = {
    "suite": suite_reference,
    "result": result_reference,
    "cli": cli_reference,
}


@functools.cache
def generated(name: str) -> str:
    """Reference NAME as Markdown (KeyError for a marker that names none)."""
    if name not in GENERATORS:
        raise KeyError(f"no reference named {name!r} (known: {', '.join(GENERATORS)})")
    return GENERATORS[name]()


def expand(markdown: str) -> str:
    """A page's Markdown with every reference marker replaced by its reference."""
    return MARKER.sub(lambda m: generated(m.group(1)), markdown)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """mkdocs: fill the markers of every page."""
    return expand(markdown)


def on_startup(**kwargs: Any) -> None:
    """mkdocs serve rebuilds in one process: generate afresh at every build."""
    generated.cache_clear()


def on_pre_build(**kwargs: Any) -> None:
    generated.cache_clear()
