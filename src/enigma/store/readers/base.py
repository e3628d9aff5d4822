"""What every reader shares: the record checks, the reject log and the table builder.

A reader turns raw input into dialogues, turns and rejects. Each input record either becomes
one dialogue (all its turns) or one row in rejects that names the file, the line or record
number, the dialog id if known, the field and the reason. Nothing is dropped otherwise.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa

from enigma.dialogue import ROLES
from enigma.store import schema as S
from enigma.store.config import IngestConfig, SourceSpec


class IngestError(ValueError):
    """A fatal input problem (missing path, empty input, nothing loadable). The message names
    the path; the CLI prints it as ``error: ...`` and exits 2."""


@dataclass
class ReadResult:
    dialogues: pa.Table
    turns: pa.Table
    rejects: pa.Table
    source: str
    spec: SourceSpec
    inputs: list[Path] = field(default_factory=list)
    n_records: int = 0

    @property
    def n_rejects(self) -> int:
        return self.rejects.num_rows


class RecordRejected(Exception):
    """Raised inside a reader while checking one record; becomes one row of rejects."""

    def __init__(self, field: str | None, reason: str, dialog_id: str | None = None):
        super().__init__(reason)
        self.field = field
        self.reason = reason
        self.dialog_id = dialog_id


def existing_path(path: str | Path, what: str) -> Path:
    path = Path(path)
    if not path.exists():
        raise IngestError(f"{path}: no such file or directory ({what})")
    return path


def input_files(path: Path, pattern: str, what: str) -> list[Path]:
    """``path`` itself if it is a file, else the files matching ``pattern`` in it, sorted."""
    if path.is_file():
        return [path]
    files = sorted(p for p in path.glob(pattern) if p.is_file())
    if not files and not broken_links(path, pattern):
        raise IngestError(f"{path}: no {pattern} files in this directory ({what})")
    return files


def broken_links(path: Path, pattern: str) -> list[tuple[Path, str]]:
    """The symbolic links matching ``pattern`` in the directory ``path`` that lead to no file
    (dangling, or a loop), each with why; the readers make each one a reject row, so that an
    input they cannot read is never skipped silently."""
    if path.is_file():
        return []
    found = []
    for p in sorted(path.glob(pattern)):
        if p.is_symlink() and not p.exists():
            try:
                os.stat(p)
            except OSError as exc:
                found.append((p, f"symbolic link to {os.readlink(p)!r} leads to no file: {exc.strerror}"))
    return found


def iter_lines(path: Path) -> Iterator[tuple[int, str | None, str | None]]:
    """``(line_number, text, error)`` for each non-blank line. Each line is decoded on its own so
    that one line with bad bytes is rejected and the others still load."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a UTF-8 byte order mark (Windows editors write one) is not content
            if not raw.strip():
                continue  # blank lines separate nothing in JSONL; they are not records
            try:
                yield lineno, raw.decode("utf-8"), None
            except UnicodeDecodeError as exc:
                yield lineno, None, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"


# Python's JSON parser recurses once per nesting level and gives up near the interpreter's
# recursion limit (about 1,000 levels) with a RecursionError, not a JSONDecodeError.
TOO_DEEP_TO_PARSE = ("JSON nested too deep to parse (Python's parser stops near 1,000 levels; "
                     "a record may nest at most ingest.max_json_depth levels)")


def parse_json_line(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordRejected(None, f"malformed JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise RecordRejected(None, TOO_DEEP_TO_PARSE) from None


def read_json_document(path: Path) -> Any:
    """A file holding one JSON document. Undecodable or malformed files raise RecordRejected
    (the caller decides whether that is fatal)."""
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.strip():
        raise RecordRejected(None, "empty file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordRejected(None, f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordRejected(None, f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise RecordRejected(None, TOO_DEEP_TO_PARSE) from None


_SURROGATE = re.compile("[\ud800-\udfff]")


def unicode_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored, or None. JSON's ``\\ud83d`` escape yields a lone UTF-16
    surrogate (e.g. an emoji cut in half by a truncating export): a valid JSON string, but not
    Unicode text, and Arrow/Parquet refuse it."""
    m = None if text.isascii() else _SURROGATE.search(text)  # isascii: a flag, no scan
    if m is None:
        return None
    return (f"not valid Unicode: lone surrogate \\u{ord(m.group()):04x} at character {m.start() + 1} "
            "(a truncated emoji or a broken \\u escape)")


def storable(text: str) -> str:
    """``text`` with lone surrogates written as escapes (``\\ud83d``), so that a reject row can
    always be stored whatever it quotes (an id, a key, a file name)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def check_json(value: Any, max_depth: int, path: str = "") -> None:
    """Raise RecordRejected where a parsed JSON value holds a key or string that is not valid
    Unicode (the field is its path, e.g. ``turns[1].text``), or is nested more than
    ``max_depth`` containers deep (the field is the top-level member, e.g. ``meta``). ``path``
    names ``value`` itself. Iterative, so that no nesting depth can exhaust the stack here;
    paths are only spelled out for the reject."""

    def spell(node) -> list:  # node: (parent node, key) or None for ``value`` itself
        keys = []
        while node is not None:
            node, key = node
            keys.append(key)
        return keys[::-1]

    def field(keys: list) -> str | None:
        out = path
        for k in keys:
            out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
        return out or None

    stack: list[tuple[Any, int, Any]] = [(value, 1, None)]
    while stack:
        v, depth, node = stack.pop()
        if isinstance(v, str):
            problem = unicode_problem(v)
            if problem:
                raise RecordRejected(field(spell(node)), problem)
        elif isinstance(v, (dict, list)):
            if depth > max_depth:
                # name the top-level member (``meta``), not a path dozens of levels long
                top = [] if path else spell(node)[:1]
                raise RecordRejected(field(top), f"nested more than {max_depth} levels deep (limit: ingest.max_json_depth)")
            if isinstance(v, list):
                stack.extend((x, depth + 1, (node, i)) for i, x in enumerate(v))
                continue
            for k, x in v.items():
                problem = unicode_problem(k)
                if problem:
                    raise RecordRejected(field(spell((node, k))), f"field name {problem}")
                stack.append((x, depth + 1, (node, k)))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class StoreBuilder:
    """Collects checked dialogues and rejects for one source, then builds the Arrow tables."""

    def __init__(self, source: str, spec: SourceSpec, config: IngestConfig):
        self.source = source
        self.spec = spec
        self.config = config
        self._dialogues: dict[str, list] = {n: [] for n in S.dialogues_schema(spec.rating_names, spec.raw_names).names}
        self._turns: dict[str, list] = {n: [] for n in S.TURNS_SCHEMA.names}
        self._rejects: dict[str, list] = {n: [] for n in S.REJECTS_SCHEMA.names}
        self._seen: dict[str, str] = {}  # dialog_id -> where it was first seen
        self.inputs: list[Path] = []

    # ---- rejects -------------------------------------------------------------------------
    def reject(self, source_file: Path | str, record: int | None, field: str | None, reason: str,
               dialog_id: str | None = None) -> None:
        self._rejects["source_file"].append(storable(str(source_file)))
        self._rejects["record"].append(record)
        self._rejects["dialog_id"].append(None if dialog_id is None else storable(dialog_id))
        self._rejects["field"].append(None if field is None else storable(field))
        self._rejects["reason"].append(storable(reason))

    # ---- dialogues -----------------------------------------------------------------------
    def add(self, source_file: Path | str, record: int | None, *, dialog_id: Any, agent_id: Any,
            turns: list[tuple[Any, Any]], ratings: dict[str, Any] | None = None,
            meta: dict[str, Any] | None = None) -> bool:
        """Check one dialogue; keep it or log why not. ``turns`` are (role, text) pairs and
        ``ratings`` raw values on the declared scales. Returns whether it was kept."""
        did = dialog_id if isinstance(dialog_id, str) else None
        try:
            row = self._check(dialog_id, agent_id, turns, ratings or {}, meta)
        except RecordRejected as exc:
            self.reject(source_file, record, exc.field, exc.reason, exc.dialog_id or did)
            return False
        where = f"{source_file}:{record}" if record is not None else str(source_file)
        if did in self._seen:
            self.reject(source_file, record, "dialog_id", f"duplicate dialog_id (first seen at {self._seen[did]})", did)
            return False
        self._seen[did] = where  # type: ignore[index]
        for k, v in row.items():
            self._dialogues[k].append(v)
        for i, (role, text) in enumerate(turns):
            self._turns["dialog_id"].append(did)
            self._turns["turn_index"].append(i)
            self._turns["role"].append(role)
            self._turns["text"].append(text)
        return True

    def _check(self, dialog_id, agent_id, turns, ratings, meta) -> dict[str, Any]:
        for name, value in (("dialog_id", dialog_id), ("agent_id", agent_id)):
            if value is None:
                raise RecordRejected(name, f"missing {name}")
            if not isinstance(value, str):
                raise RecordRejected(name, f"{name} must be a string, got {type(value).__name__}")
            if not value.strip():
                raise RecordRejected(name, f"{name} is empty")
            problem = unicode_problem(value)  # ids can come from file names, not only JSON
            if problem:
                raise RecordRejected(name, f"{name} is {problem}")
        if not isinstance(turns, list) or not turns:
            raise RecordRejected("turns", "no turns")
        limit = self.config.max_text_chars
        for i, (role, text) in enumerate(turns):
            if role not in ROLES:
                raise RecordRejected(f"turns[{i}].role", f"unknown role {role!r}; expected one of {list(ROLES)}")
            if not isinstance(text, str):
                raise RecordRejected(f"turns[{i}].text", f"text must be a string, got {type(text).__name__}")
            if not text.strip():
                raise RecordRejected(f"turns[{i}].text", "empty or whitespace-only text")
            problem = unicode_problem(text)
            if problem:
                raise RecordRejected(f"turns[{i}].text", f"text is {problem}")
            if len(text) > limit:
                raise RecordRejected(
                    f"turns[{i}].text",
                    f"text has {len(text):,} characters, over the limit ingest.max_text_chars={limit:,}",
                )
        if not any(role == "agent" for role, _ in turns):
            raise RecordRejected("turns", "no agent turn (the dialogue says nothing about the agent)")
        if not isinstance(ratings, dict):
            raise RecordRejected("ratings", f"ratings must be an object, got {type(ratings).__name__}")

        row: dict[str, Any] = {"dialog_id": dialog_id, "agent_id": agent_id, "source": self.source,
                               "n_turns": len(turns)}
        normalised: dict[str, float | None] = {}
        for name in ratings:
            if name not in self.spec.ratings:
                declared = ", ".join(self.spec.ratings) or "none"
                raise RecordRejected(
                    f"ratings.{name}",
                    f"rating {name!r} has no declared scale (declared: {declared}); add it to params.yaml "
                    f"ingest.sources.{self.source}.ratings or pass --scale {name}=MIN:MAX",
                )
        for name, scale in self.spec.ratings.items():
            value = ratings.get(name)
            if value is None:
                normalised[name] = None
                row[S.RAW_PREFIX + name] = None
                continue
            if not _is_number(value):
                raise RecordRejected(f"ratings.{name}", f"rating must be a finite number, got {value!r}")
            if not scale.contains(value):
                raise RecordRejected(f"ratings.{name}", f"rating {value!r} outside its scale {scale.describe()}")
            row[S.RAW_PREFIX + name] = float(value)
            normalised[name] = scale.normalised(float(value))
        for name, parts in self.spec.derived_mean.items():
            values = [normalised[p] for p in parts]
            # A derived mean over a partial set would not be comparable across dialogues.
            normalised[name] = None if any(v is None for v in values) else sum(values) / len(values)  # type: ignore[arg-type]
        for name, value in normalised.items():
            row[S.RATING_PREFIX + name] = value
        if meta is not None and not isinstance(meta, dict):
            raise RecordRejected("meta", f"meta must be an object, got {type(meta).__name__}")
        check_json(meta, self.config.max_json_depth, "meta")
        row["meta"] = json.dumps(meta, ensure_ascii=False, sort_keys=True) if meta else None
        return row

    # ---- output --------------------------------------------------------------------------
    def build(self) -> ReadResult:
        schema = S.dialogues_schema(self.spec.rating_names, self.spec.raw_names)
        return ReadResult(
            dialogues=pa.Table.from_pydict(self._dialogues, schema=schema),
            turns=pa.Table.from_pydict(self._turns, schema=S.TURNS_SCHEMA),
            rejects=pa.Table.from_pydict(self._rejects, schema=S.REJECTS_SCHEMA),
            source=self.source,
            spec=self.spec,
            inputs=list(self.inputs),
            n_records=len(self._dialogues["dialog_id"]) + len(self._rejects["reason"]),
        )


def progress(iterable, *, total=None, desc: str, enabled: bool, unit: str = "it"):
    """tqdm on stderr when enabled; a plain iterator otherwise (tests, piped runs)."""
    if not enabled:
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, leave=False)


def require_scales(spec: SourceSpec, source: str) -> None:
    """Sources with known ratings cannot be read without their scales: fail before reading."""
    if not spec.ratings:
        raise IngestError(
            f"no rating scales declared for source {source!r}: params.yaml needs "
            f"ingest.sources.{source}.ratings (run from the repository root or pass --params)"
        )


def known_id(obj: Any, key: str) -> str | None:
    """The record's id when it has a usable one, so that its reject row can name it."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None


def add_json_lines(
    builder: "StoreBuilder",
    path: Path,
    lines: "Iterator[tuple[int, str | None, str | None]]",
    parse: "Callable[[Any], dict]",
    id_key: str,
) -> None:
    """Add every line of a JSON-lines file as one record; a line that fails to decode or
    parse becomes a reject row naming the line (and the record's id where it has one), and a
    file with no lines at all becomes one reject row, so nothing is dropped silently."""
    n_lines = 0
    for lineno, text, error in lines:
        n_lines += 1
        if error:
            builder.reject(path, lineno, None, error)
            continue
        obj = None
        try:
            obj = parse_json_line(text)
            check_json(obj, builder.config.max_json_depth)
            rec = parse(obj)
        except RecordRejected as exc:
            builder.reject(path, lineno, exc.field, exc.reason, exc.dialog_id or known_id(obj, id_key))
            continue
        builder.add(path, lineno, **rec)
    if n_lines == 0:
        builder.reject(path, None, None, "empty file (no records)")
