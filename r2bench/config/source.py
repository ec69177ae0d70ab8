"""Load YAML while remembering where every value came from.

pydantic reports errors by field path; users need a line and a column. `SourceDoc` keeps a map
from field path to the position of the value (or key) in the file so every error can point there.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from r2bench.config.errors import ConfigError, ConfigIssue, FieldPath
from r2bench.safeio import CONFIG_LIMIT, InputRefused, read_bytes_bounded
from r2bench.textinput import NotText, decode_text

# Cap on file size: configs are small; a huge file is a mistake (or an attack on the parser).
MAX_CONFIG_BYTES = CONFIG_LIMIT
# Cap on nesting (the top-level mapping counts as 1): real configs need about 6 levels; PyYAML's
# composer recurses per level, so a 1 KB file of 500 `[` would otherwise end in RecursionError.
MAX_DEPTH = 32
_EMPTY = "file is empty; expected a mapping of settings"
_SURROGATE = re.compile("[\ud800-\udfff]")
_STANDARD_COLLECTION_TAGS = ("tag:yaml.org,2002:seq", "tag:yaml.org,2002:map")


@dataclass
class SourceDoc:
    """Plain data loaded from one YAML file plus the position of every node in it."""

    file: str
    data: Any
    positions: dict[FieldPath, tuple[int, int]] = field(default_factory=dict)
    key_positions: dict[FieldPath, tuple[int, int]] = field(default_factory=dict)

    def locate(self, path: FieldPath) -> tuple[int | None, int | None]:
        """Line and column (1-based) of the deepest known node on `path`."""
        for depth in range(len(path), -1, -1):
            prefix = tuple(path[:depth])
            if prefix in self.positions:
                return self.positions[prefix]
        return None, None

    def locate_key(self, path: FieldPath) -> tuple[int | None, int | None]:
        """Position of the mapping key itself (for unknown-key errors), else of the value."""
        if path in self.key_positions:
            return self.key_positions[path]
        return self.locate(path)

    def issue(
        self, path: FieldPath, message: str, hint: str = "", at_key: bool = False
    ) -> ConfigIssue:
        line, column = self.locate_key(path) if at_key else self.locate(path)
        return ConfigIssue(self.file, line, column, path, message, hint)


def load_yaml(path: Path) -> SourceDoc:
    """Read and parse `path`; YAML syntax errors become a located ConfigError."""
    name = str(path)
    try:
        raw = read_bytes_bounded(path, MAX_CONFIG_BYTES, "a config file")
    except OSError as exc:
        raise ConfigError(
            [ConfigIssue(name, None, None, (), f"cannot read file: {exc.strerror}")]
        ) from exc
    except InputRefused as exc:
        message = str(exc).removeprefix(f"{path}: ")
        raise ConfigError([ConfigIssue(name, None, None, (), message)]) from exc
    try:
        text = decode_text(raw, name)  # UTF-16 (PowerShell's `>`), a BOM, CR line ends
    except NotText as exc:
        message = str(exc).removeprefix(f"{path}: ")
        raise ConfigError([ConfigIssue(name, None, None, (), message)]) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [ConfigIssue(name, None, None, (), f"not UTF-8 text (byte {exc.start})")]
        ) from exc
    return parse_yaml(text, name)


def load_data(path: Path) -> Any:
    """Plain data of a YAML file that has no model of its own here (a compare reference or
    policy), read with the same bounds as a config: size, depth and alias expansion. An empty
    file is None. Raises ConfigError, located."""
    try:
        return load_yaml(path).data
    except ConfigError as error:
        if [issue.message for issue in error.issues] == [_EMPTY]:
            return None
        raise


def parse_yaml(text: str, name: str = "<string>") -> SourceDoc:
    """Parse YAML text into a SourceDoc (single document, safe constructors only)."""
    with _collector_paused():  # millions of objects, none of them garbage: see below
        return _parse(text, name)


def _parse(text: str, name: str) -> SourceDoc:
    try:
        root = _compose(text, name)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        message = f"YAML syntax error: {exc.problem}" if exc.problem else "YAML syntax error"
        raise ConfigError(
            [ConfigIssue(name, line, column, (), message, exc.context or "")]
        ) from exc
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigIssue(name, None, None, (), f"YAML error: {exc}")]) from exc
    doc = SourceDoc(name, None)
    if root is None:
        raise ConfigError([ConfigIssue(name, 1, 1, (), _EMPTY)])
    doc.data = _Converter(doc, max(_Converter.MAX_NODES, len(text) // 4)).convert(root, ())
    return doc


_FAST_LOADER: Any = getattr(yaml, "CSafeLoader", None)
"""libyaml's parser where PyYAML has it: the same nodes and marks, ten times as fast (a
100,000-node testbed from Slurm is 3.7 MB of YAML)."""


def _compose(text: str, name: str) -> yaml.Node | None:
    """The document's node tree, its depth checked first. libyaml reads it where PyYAML has
    it; a document libyaml refuses is read again by PyYAML's own parser, whose errors are the
    ones r2bench explains (a lone surrogate's escape is located and named by the converter,
    where libyaml only says "invalid Unicode character escape code")."""
    if _FAST_LOADER is not None:
        try:
            _check_depth(text, name, _FAST_LOADER)
            return yaml.compose(text, Loader=_FAST_LOADER)
        except yaml.YAMLError:
            pass
    _check_depth(text, name, yaml.SafeLoader)
    return yaml.compose(text, Loader=yaml.SafeLoader)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a document is read: a large file makes
    millions of objects (events, nodes, the data), none of them garbage, and each collection
    pass would walk them all again (10 s of a 100,000-node testbed's 15). Restored as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass
class _Frame:
    """One open collection while scanning events: where it is, and where its next item goes."""

    part: str | int | None
    is_mapping: bool
    index: int = -1
    key: str | None = None
    expect_key: bool = True

    def next_part(self, event: yaml.Event) -> str | int | None:
        """The path part of the node `event` starts (None for a mapping key)."""
        if not self.is_mapping:
            self.index += 1
            return self.index
        if self.expect_key:
            self.expect_key = False
            self.key = event.value if isinstance(event, yaml.ScalarEvent) else None
            return None
        self.expect_key = True
        return self.key


def _check_depth(text: str, name: str, loader: Any) -> None:
    """Refuse nesting deeper than MAX_DEPTH before composing (the event parser is iterative)."""
    stack: list[_Frame] = []
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionEndEvent):
            stack.pop()
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue
        part = stack[-1].next_part(event) if stack else None
        if not isinstance(event, yaml.CollectionStartEvent):
            continue
        if len(stack) >= MAX_DEPTH:
            # Name the innermost mapping key (what a user can find); the line and column
            # point at the exact bracket or item.
            parts = [f.part for f in stack[1:] if f.part is not None]
            parts += [part] if part is not None else []
            named = [i for i, p in enumerate(parts) if isinstance(p, str)]
            path = tuple(parts[: named[-1] + 1]) if named else ()
            mark = event.start_mark
            raise ConfigError(
                [
                    ConfigIssue(
                        name,
                        mark.line + 1 if mark else None,
                        mark.column + 1 if mark else None,
                        path,
                        f"nested deeper than {MAX_DEPTH} levels",
                        "configs need a few levels; flatten it",
                    )
                ]
            )
        stack.append(_Frame(part, isinstance(event, yaml.MappingStartEvent)))


def _short_tag(tag: str) -> str:
    return "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:yaml.org") else tag


_PLAIN_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)")
_PLAIN_FLOAT = re.compile(
    r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)"
)


class WrittenFloat(float):
    """A YAML float that remembers how it was written: `1.10` stays `1.10` as an env value."""

    text: str

    def __new__(cls, value: float, text: str) -> WrittenFloat:
        number = super().__new__(cls, value)
        number.text = text
        return number

    def __str__(self) -> str:
        return self.text


def read_as_number(text: str) -> bool:
    """Whether a plain (unquoted) YAML scalar `text` is read as a number by r2bench's loader
    though YAML 1.1 calls it text (`1e3`): a writer must quote such a string."""
    return "." not in text and bool(_PLAIN_FLOAT.fullmatch(text)) and not _PLAIN_INT.fullmatch(text)


def _as_written(node: yaml.Node, value: Any) -> Any:
    """YAML 1.1 reads `010` as 8, `0x10` as 16, `1:30` as 90 and `1_000` as 1000: a number in
    any form but plain decimal stays the text the user wrote (a numeric field then refuses it,
    located; an env value keeps it as written). Floats keep their text beside their value."""
    if not isinstance(node, yaml.ScalarNode) or node.style:  # plain: None, or '' from libyaml
        return value
    if isinstance(value, str) and node.tag == "tag:yaml.org,2002:str" and "." not in value:
        # YAML 1.1 wants a dot in a float (`1e7` is text); read it as the number it looks like.
        if read_as_number(value):
            return WrittenFloat(float(value), value)
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not _PLAIN_INT.fullmatch(node.value):
        return node.value
    if isinstance(value, float):
        if not _PLAIN_FLOAT.fullmatch(node.value):
            return node.value
        return WrittenFloat(value, node.value)
    return value


class _Converter:
    """Turns a composed YAML node tree into plain data, recording positions on the way."""

    # Aliases can make a tiny file expand exponentially ("billion laughs"): cap the node count.
    MAX_NODES = 100_000

    def __init__(self, doc: SourceDoc, limit: int = MAX_NODES) -> None:
        self.doc = doc
        self.limit = limit
        """Values at most: MAX_NODES, or one per four bytes of the file where that is more (a
        config written out holds fewer; only aliases expand past it)."""
        self.loader = yaml.SafeLoader("")
        self.count = 0
        # The collections being converted, outermost first: an alias to one of them
        # (`a: &x [*x]`) is a collection inside itself, which no config can mean.
        self.open: set[int] = set()

    def convert(self, node: yaml.Node, path: FieldPath) -> Any:
        if id(node) in self.open:
            raise ConfigError(
                [
                    self.doc.issue(
                        path,
                        "an alias refers to itself (the collection it is in, *x inside &x)",
                        "write the values out instead of the alias",
                    )
                ]
            )
        if not isinstance(node, yaml.CollectionNode):
            return self.scalar(node, path)
        self.open.add(id(node))
        try:
            return self.collection(node, path)
        finally:
            self.open.discard(id(node))

    def scalar(self, node: yaml.Node, path: FieldPath) -> Any:
        """A plain value, with its position recorded."""
        self.counted(node, path)
        try:
            value = self.loader.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise ConfigError([self.doc.issue(path, f"cannot read value: {exc}")]) from exc
        except ValueError as exc:  # int() refuses more than 4300 digits
            digits = sum(char.isdigit() for char in str(node.value))
            raise ConfigError(
                [
                    self.doc.issue(
                        path,
                        f"a number of {digits} digits is too long to read",
                        "no setting needs one; quote it if it is meant as text",
                    )
                ]
            ) from exc
        if isinstance(value, str):
            self.refuse_surrogates(value, path)
        return _as_written(node, value)

    def refuse_surrogates(
        self, text: str, path: FieldPath, at: tuple[int, int] | None = None
    ) -> None:
        """Refuse a lone surrogate (`"\\ud800"`, half of a UTF-16 pair): no file, command line
        or environment can carry it as UTF-8, so it would fail only later, when the plan is
        written out."""
        found = _SURROGATE.search(text)
        if found is None:
            return
        if at is not None:
            self.doc.positions[path] = at
        code = f"\\u{ord(found.group()):04x}"
        raise ConfigError(
            [
                self.doc.issue(
                    path,
                    f"holds a lone surrogate ({code} at character {found.start() + 1}), which no"
                    " UTF-8 text can carry",
                    "write the character itself, or its \\U00XXXXXX escape, not half of a"
                    " UTF-16 pair",
                )
            ]
        )

    def counted(self, node: yaml.Node, path: FieldPath) -> None:
        """Count one more value (refusing alias expansion past MAX_NODES) and record where
        it is."""
        self.count += 1
        if self.count > self.limit:
            # Name the innermost key (what a user can find), not the list indices under it.
            named = [i for i, part in enumerate(path) if isinstance(part, str)]
            where = path[: named[-1] + 1] if named else ()
            message = f"more than {self.limit} values (alias expansion: nested *aliases?)"
            raise ConfigError([self.doc.issue(where, message, "write the values out")])
        self.doc.positions[path] = (node.start_mark.line + 1, node.start_mark.column + 1)

    def collection(self, node: yaml.CollectionNode, path: FieldPath) -> Any:
        """A mapping or a list, converted item by item."""
        self.counted(node, path)
        if node.tag not in _STANDARD_COLLECTION_TAGS:
            raise ConfigError(
                [
                    self.doc.issue(
                        path,
                        f"YAML tag '{_short_tag(node.tag)}' is not allowed here",
                        "configs hold plain mappings, lists and values; remove the tag",
                    )
                ]
            )
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, path)
        return [self.convert(item, (*path, i)) for i, item in enumerate(node.value)]

    def mapping(self, node: yaml.MappingNode, path: FieldPath) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConfigError(
                    [self.doc.issue(path, "mapping keys must be plain names, found a structure")]
                )
            key = key_node.value
            child = (*path, key)
            position = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            self.doc.key_positions[child] = position
            self.refuse_surrogates(key, child, position)
            if key in result:
                self.doc.positions[child] = position
                raise ConfigError(
                    [self.doc.issue(child, f"duplicate key '{key}'", "each key may appear once")]
                )
            result[key] = self.convert(value_node, child)
        return result
