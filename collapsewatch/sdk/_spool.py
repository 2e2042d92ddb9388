"""Disk spool: rollout batches the server could not take yet, kept until it can.

One batch is one JSON-lines file: a header line, then one line per rollout (or, for
a ``cross_scores`` batch, one line holding a step's cross-score matrix). Files
are written to a temporary name and renamed into place, so a crash never leaves a
half-written batch where a reader looks. File names start with a zero-padded
timestamp of when the batch was logged, so sorting the names resends oldest first.

Several processes may share a spool folder (same run name): a file sent twice is
harmless because the server is idempotent on rollout_id.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

SPOOL_FORMAT = 1
_HEADER_KEY = "collapsewatch_spool"
_SUFFIX = ".jsonl"
_STALE_TMP_SECONDS = 600.0


class SpoolFullError(Exception):
    """Writing the batch would take the spool past its byte limit."""


@dataclass
class SpooledBatch:
    """A batch read back from the spool.

    ``rollouts`` holds one JSON document (bytes) per line: rollouts, or one
    CrossScores for ``kind == "cross_scores"``. ``validated`` is False for batches
    spilled before the SDK validated them; those are validated on resend. ``n`` is the
    number of rollouts the batch counts for.
    """

    path: Path
    rollouts: list[bytes]
    complete_steps: list[int] = field(default_factory=list)
    validated: bool = True
    size: int = 0
    kind: str = "rollouts"
    n: int = 0


class Spool:
    """Thread-safe spool folder with a byte limit.

    Counts (files, rollouts, bytes) are kept in memory after one scan of the folder;
    they are exact for one process and approximate when processes share the folder.
    """

    def __init__(self, directory: Path, max_bytes: int, run: str) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.run = run
        self._lock = threading.Lock()
        self._files = 0
        self._rollouts = 0
        self._bytes = 0
        self._counter = 0
        self._writing = 0

    # -- counts ----------------------------------------------------------------------
    @property
    def pending_files(self) -> int:
        return max(0, self._files)

    @property
    def pending_rollouts(self) -> int:
        return max(0, self._rollouts)

    @property
    def bytes_used(self) -> int:
        return max(0, self._bytes)

    def scan(self) -> None:
        """Count what earlier processes left behind and delete stale temporary files."""
        files = rollouts = size = 0
        now = time.time()
        if self.directory.is_dir():
            for entry in os.scandir(self.directory):
                if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                    try:
                        if now - entry.stat().st_mtime > _STALE_TMP_SECONDS:
                            os.unlink(entry.path)
                    except OSError:
                        pass
                    continue
                if not entry.name.endswith(_SUFFIX):
                    continue
                try:
                    size += entry.stat().st_size
                    with open(entry.path, "rb") as fh:
                        header = json.loads(fh.readline())
                    rollouts += int(header.get("n", 0))
                    files += 1
                except (OSError, ValueError, AttributeError):
                    files += 1  # unreadable: read() moves it aside and says so
        with self._lock:
            self._files, self._rollouts, self._bytes = files, rollouts, size

    # -- writing ---------------------------------------------------------------------
    def write(
        self,
        rollouts: list[bytes],
        complete_steps: list[int],
        *,
        validated: bool,
        order_ns: int,
        kind: str = "rollouts",
    ) -> Path:
        """Store one batch; returns its path.

        Raises:
            SpoolFullError: the batch does not fit under ``max_bytes``.
            OSError: the folder or file could not be written.
        """
        n = len(rollouts) if kind == "rollouts" else 0
        data = self._encode(rollouts, complete_steps, validated, kind, n)
        with self._lock:
            if self._bytes + len(data) > self.max_bytes:
                raise SpoolFullError(
                    f"spool {self.directory} holds {self._bytes} bytes; a batch of "
                    f"{len(data)} bytes would pass max_spool_bytes={self.max_bytes}"
                )
            self._bytes += len(data)  # reserve before the slow part
            self._writing += 1
            self._counter += 1
            name = f"{order_ns:020d}-{os.getpid()}-{self._counter:06d}{_SUFFIX}"
        path = self.directory / name
        try:
            self._write_atomic(path, data)
        except OSError:
            with self._lock:
                self._bytes -= len(data)
                self._writing -= 1
            raise
        with self._lock:
            self._files += 1
            self._rollouts += n
            self._writing -= 1
        return path

    def reconcile(self) -> None:
        """Zero the counts if the folder is empty (another process may have sent our
        files); a no-op while a write is in progress."""
        with self._lock:
            if self._writing or (self._files == 0 and self._bytes == 0):
                return
            if not self.paths():
                self._files = self._rollouts = self._bytes = 0

    def replace(
        self, batch: SpooledBatch, rollouts: list[bytes], complete_steps: list[int]
    ) -> None:
        """Rewrite ``batch``'s file with what is left of it (after a partial resend)."""
        n = len(rollouts) if batch.kind == "rollouts" else 0
        data = self._encode(rollouts, complete_steps, True, batch.kind, n)
        self._write_atomic(batch.path, data)
        with self._lock:
            self._bytes += len(data) - batch.size
            self._rollouts -= batch.n - n

    def _encode(
        self, rollouts: list[bytes], complete_steps: list[int], validated: bool, kind: str, n: int
    ) -> bytes:
        header = {
            _HEADER_KEY: SPOOL_FORMAT,
            "run": self.run,
            "kind": kind,
            "n": n,
            "complete_steps": list(complete_steps),
            "validated": validated,
        }
        lines = [json.dumps(header, separators=(",", ":")).encode(), *rollouts]
        return b"\n".join(lines) + b"\n"

    def _write_atomic(self, path: Path, data: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)

    # -- reading ---------------------------------------------------------------------
    def paths(self) -> list[Path]:
        """Spooled batch files, oldest first."""
        try:
            names = sorted(
                e.name
                for e in os.scandir(self.directory)
                if e.name.endswith(_SUFFIX) and not e.name.startswith(".")
            )
        except FileNotFoundError:
            return []
        return [self.directory / n for n in names]

    def read(self, path: Path) -> SpooledBatch | None:
        """Read one batch; None if another process took it meanwhile.

        Raises:
            ValueError: the file is not a spool batch; it has been renamed to
                ``*.bad`` so that it is not read again.
        """
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        lines = [line for line in data.split(b"\n") if line.strip()]
        try:
            header = json.loads(lines[0]) if lines else None
            if not isinstance(header, dict) or header.get(_HEADER_KEY) != SPOOL_FORMAT:
                raise ValueError("missing or unknown spool header")
            steps = [int(s) for s in header.get("complete_steps", [])]
            validated = bool(header.get("validated", False))
            kind = str(header.get("kind", "rollouts"))
            n = int(header.get("n", 0))
        except (ValueError, TypeError) as exc:
            bad = path.with_name(path.name + ".bad")
            with contextlib.suppress(OSError):
                os.replace(path, bad)
            with self._lock:
                self._files -= 1
                self._bytes -= len(data)
            raise ValueError(f"unreadable spool file moved to {bad}: {exc}") from exc
        return SpooledBatch(path, lines[1:], steps, validated, len(data), kind, n)

    def remove(self, batch: SpooledBatch) -> None:
        """Delete a batch that has been delivered (or dropped)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(batch.path)
        with self._lock:
            self._files -= 1
            self._rollouts -= batch.n
            self._bytes -= batch.size
