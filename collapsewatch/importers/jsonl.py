"""Read and write collapsewatch's own wire format as JSON Lines.

One :class:`~collapsewatch.schema.Rollout` JSON object per line, exactly the objects
the SDK sends and ``POST /api/v1/runs/{run_id}/rollouts`` accepts in ``rollouts``
(DESIGN.md §3). Blank lines are ignored. There is no mapping: the fields are ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from collapsewatch.importers import ImportFormatError
from collapsewatch.schema import Rollout

__all__ = ["iter_rollouts", "parse_line", "write_rollouts"]


def _describe(exc: ValidationError) -> tuple[str | None, str]:
    """(field, why) from pydantic's errors: the first error's ``loc`` as a dotted path
    (``turns.0.reward``), and every error's message."""
    errors = exc.errors(include_url=False)
    fields = [".".join(str(part) for part in err["loc"]) for err in errors]
    first = fields[0] or None
    if len(errors) == 1:
        return first, errors[0]["msg"]
    parts = [f"{loc or '<line>'}: {err['msg']}" for loc, err in zip(fields, errors, strict=True)]
    return first, f"{errors[0]['msg']} ({len(errors)} errors: {'; '.join(parts)})"


def parse_line(line: str, *, path: str | Path | None = None, line_no: int | None = None) -> Rollout:
    """Validate one JSON line as a :class:`Rollout`. Raises :class:`ImportFormatError`
    naming ``path``, ``line_no`` and the first failing field (from pydantic's ``loc``)."""
    try:
        return Rollout.model_validate_json(line)
    except ValidationError as exc:
        field, why = _describe(exc)
        raise ImportFormatError(why, path=path, line=line_no, field=field) from exc


def iter_rollouts(path: str | Path) -> Iterator[Rollout]:
    """Stream the rollouts of a collapsewatch JSON Lines file, one per non-blank line."""
    path = Path(path)
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if line.strip():
                yield parse_line(line, path=path, line_no=line_no)


def write_rollouts(path: str | Path, rollouts: Iterable[Rollout]) -> int:
    """Write rollouts to ``path`` as JSON Lines (replacing the file); returns how many
    were written. :func:`iter_rollouts` reads them back equal."""
    count = 0
    with Path(path).open("w", encoding="utf-8") as fh:
        for rollout in rollouts:
            fh.write(rollout.model_dump_json())
            fh.write("\n")
            count += 1
    return count
