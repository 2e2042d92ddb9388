"""Importers: turn training logs written by other trainers into :class:`Rollout` objects.

Four formats are read (``FORMATS``):

- ``"collapsewatch"``: our own wire format as JSON Lines, one ``Rollout`` per line
  (:mod:`collapsewatch.importers.jsonl`, which also writes it).
- ``"verl"``: verl's ``trainer.rollout_data_dir`` dump, one JSON object per line with
  ``input``, ``output``, ``score``, ``step``, ``request_id``; a file or a directory of
  ``{step}.jsonl`` files (:mod:`collapsewatch.importers.verl`).
- ``"trl-md"``: the Markdown rollout log of a TRL GRPO fork, ``## === Rollout Step N ===``
  headings and ``### Sample k`` sections (:mod:`collapsewatch.importers.trl_md`).
- ``"chat"``: multi-turn agent trajectories in the chat-messages shape, one
  ``{"messages": [...], "reward": ...}`` object per line (:mod:`collapsewatch.importers.chat`).

Quickstart::

    from collapsewatch.importers import detect_format, load_rollouts

    detect_format("step2.jsonl")            # -> "verl"
    for rollout in load_rollouts("healthy_r4.rollout_results.md"):
        ...

Every importer streams: it holds one rollout (one line, one Markdown sample) at a
time. A record that breaks its format raises :class:`ImportFormatError` naming the
file, the line and the field.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from collapsewatch.schema import Rollout

__all__ = [
    "FORMATS",
    "ImportFormatError",
    "detect_format",
    "load_rollouts",
    "state_hash",
]

FORMATS = ("collapsewatch", "verl", "trl-md", "chat")

# Format name -> module. Imported lazily: the format modules import this package for
# ImportFormatError and state_hash, so importing them here at the top would be a cycle.
_MODULES = {
    "collapsewatch": "collapsewatch.importers.jsonl",
    "verl": "collapsewatch.importers.verl",
    "trl-md": "collapsewatch.importers.trl_md",
    "chat": "collapsewatch.importers.chat",
}

_EXPECTED = (
    "expected one of: a JSON Lines file of collapsewatch rollouts (objects with "
    "'rollout_id', 'step', 'state_id', 'reward', 'turns'); a verl rollout_data_dir JSON "
    "Lines file (objects with 'input', 'output', 'score', 'step') or a directory of "
    "such '{step}.jsonl' files; a TRL Markdown rollout log with '## === Rollout Step N ==='"
    " headings; a JSON Lines file of chat trajectories (objects with 'messages', 'reward')"
)
_VERL_KEYS = frozenset({"input", "output", "score"})
_COLLAPSEWATCH_KEYS = frozenset({"rollout_id", "turns"})
_CHAT_KEYS = frozenset({"messages"})
_TRL_STEP_HEADING = re.compile(r"^## === Rollout Step \d+ ===")
# A first JSON line longer than this is not sniffed (a file with no line breaks).
_MAX_SNIFF_LINE = 16 * 1024 * 1024
_MAX_SNIFF_MD_LINES = 200


class ImportFormatError(ValueError):
    """A log does not match the format it is read as.

    The message names the file, the line (1-based) and the field when they are known:
    ``"step2.jsonl:17: field 'score': expected a number, got 'abc'"``. The parts are
    also kept as attributes ``path``, ``line`` and ``field`` (``None`` when unknown).
    """

    def __init__(
        self,
        why: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.why = why
        self.path = None if path is None else str(path)
        self.line = line
        self.field = field
        where = ""
        if self.path is not None:
            where = self.path if line is None else f"{self.path}:{line}"
        elif line is not None:
            where = f"line {line}"
        what = f"field '{field}': {why}" if field else why
        super().__init__(f"{where}: {what}" if where else what)


def json_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSON-lines file with their 1-based line numbers; blank lines
    are skipped.

    Raises:
        ImportFormatError: a line is not valid JSON or not a JSON object (file and line
            named).
    """
    with Path(path).open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ImportFormatError(
                    f"not valid JSON: {exc.msg} (column {exc.colno})", path=path, line=line_no
                ) from exc
            if not isinstance(record, dict):
                raise ImportFormatError(
                    f"expected a JSON object, got {type(record).__name__}", path=path, line=line_no
                )
            yield line_no, record


def state_hash(text: str) -> str:
    """A short stable id for an initial state: the first 16 hex digits of the SHA-256
    of ``text`` (UTF-8). Equal strings give equal ids, so rollouts that share the exact
    prompt fall into one GRPO group."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def step_files(directory: str | Path) -> list[tuple[int, Path]]:
    """The ``*.jsonl`` files of a verl ``rollout_data_dir``, as ``(step, path)`` in step
    order. The step is the number that ends the file's stem (``12.jsonl``,
    ``step12.jsonl``); a ``.jsonl`` file without one raises :class:`ImportFormatError`."""
    directory = Path(directory)
    found = []
    for path in directory.glob("*.jsonl"):
        match = re.search(r"(\d+)$", path.stem)
        if match is None:
            raise ImportFormatError(
                "expected a file named '{step}.jsonl' in a verl rollout_data_dir", path=path
            )
        found.append((int(match.group(1)), path))
    if not found:
        raise ImportFormatError(
            "directory holds no '.jsonl' files; expected a verl rollout_data_dir of "
            "'{step}.jsonl' files",
            path=directory,
        )
    return sorted(found)


def detect_format(path: str | Path) -> str:
    """Name the format of a log by looking at its content, not its name.

    A directory is a verl ``rollout_data_dir`` if its first ``{step}.jsonl`` file is
    verl. A JSON Lines file is told by the keys of its first non-empty line (``input``,
    ``output``, ``score``: verl; ``rollout_id``, ``turns``: collapsewatch; ``messages``:
    chat). A Markdown
    file is ``trl-md`` when a ``## === Rollout Step N ===`` heading appears in its first
    200 non-empty lines.

    Returns one of :data:`FORMATS`. Raises :class:`FileNotFoundError` when the path does
    not exist and :class:`ImportFormatError` when the content matches no format.
    """
    path = Path(path)
    if path.is_dir():
        first = step_files(path)[0][1]
        fmt = _sniff_file(first)
        if fmt != "verl":
            raise ImportFormatError(
                f"a directory is read only as a verl rollout_data_dir, but {first.name} is {fmt!r}",
                path=path,
            )
        return fmt
    if not path.exists():
        raise FileNotFoundError(f"no such file or directory: {path}")
    return _sniff_file(path)


def _sniff_file(path: Path) -> str:
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            lines = (
                (no, raw.strip())
                for no, raw in enumerate(iter(lambda: fh.readline(_MAX_SNIFF_LINE), ""), 1)
            )
            nonempty = ((no, line) for no, line in lines if line)
            first = next(nonempty, None)
            if first is None:
                raise ImportFormatError("file is empty; " + _EXPECTED, path=path)
            line_no, line = first
            if line.startswith("{"):
                return _sniff_json_line(line, path=path, line_no=line_no)
            if line.startswith("#"):
                head = itertools.islice(nonempty, _MAX_SNIFF_MD_LINES - 1)
                if any(_TRL_STEP_HEADING.match(text) for text in (line, *(t for _, t in head))):
                    return "trl-md"
                raise ImportFormatError(
                    f"Markdown without a '## === Rollout Step N ===' heading in its first "
                    f"{_MAX_SNIFF_MD_LINES} lines; " + _EXPECTED,
                    path=path,
                )
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"not UTF-8 text ({exc.reason}); " + _EXPECTED, path=path) from exc
    raise ImportFormatError(
        f"line {line_no} starts with {line[:40]!r}, which matches no format; " + _EXPECTED,
        path=path,
    )


def _sniff_json_line(line: str, *, path: Path, line_no: int) -> str:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            f"first line is not valid JSON ({exc.msg}); " + _EXPECTED, path=path, line=line_no
        ) from exc
    keys = set(obj) if isinstance(obj, dict) else set()
    if keys >= _VERL_KEYS:
        return "verl"
    if keys >= _COLLAPSEWATCH_KEYS:
        return "collapsewatch"
    if keys >= _CHAT_KEYS:
        return "chat"
    raise ImportFormatError(
        f"JSON object with keys {sorted(keys)} matches no format; " + _EXPECTED,
        path=path,
        line=line_no,
    )


def load_rollouts(path: str | Path, format: str = "auto", **options: Any) -> Iterator[Rollout]:
    """Read the rollouts of a log, one at a time.

    ``format`` is one of :data:`FORMATS`, or ``"auto"`` to call :func:`detect_format`.
    ``options`` go to the format's ``iter_rollouts`` (for verl: ``success_threshold``).
    Raises :class:`ImportFormatError` at the first record that breaks the format, naming
    the file, line and field; rollouts before it have already been yielded.
    """
    if format == "auto":
        format = detect_format(path)
    if format not in _MODULES:
        raise ValueError(f"unknown format {format!r}; expected 'auto' or one of {FORMATS}")
    module = importlib.import_module(_MODULES[format])
    return module.iter_rollouts(path, **options)
