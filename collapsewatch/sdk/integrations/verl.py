"""verl integration: follow a live run through the files verl already writes, or stream
scored samples from inside the reward function.

**Follower** (no change to the training job). verl writes, when asked to:

- ``trainer.rollout_data_dir=DIR``: one ``{step}.jsonl`` per training step, one line per
  rollout (``input``, ``output``, ``score``, ``step``, ``request_id``), the whole file
  written once the step's rollouts are scored;
- ``trainer.logger=[...,"file"]``: the file logger's metrics JSON Lines at
  ``VERL_FILE_LOGGER_PATH``, one line per step, ``{"step": N, "data": {name: value}}``
  (newer versions add ``"elapsed_seconds"``); verl opens it afresh (truncated) when
  a job starts.

:class:`VerlFollower` tails both. A step file is sent once it is complete: the next
step's file exists, or it has not changed for ``idle_seconds``, or the caller says the
run is over (``final=True``, ``--once``). It is read with the ``verl`` importer
(:mod:`collapsewatch.importers.verl`), so a followed run and an imported one give the
same rollouts and the same metrics. Metric lines are renamed with
:data:`~.aliases.VERL_ALIASES` and stored as ``trainer.*`` series. What was delivered is
written to a state file, so a restarted follower continues where it stopped (and
sending something twice is harmless: rollout ids and metric points are idempotent).

**Reward wrapper** (in-process). :func:`stream_rewards` wraps a verl custom reward
function (``compute_score(data_source, solution_str, ground_truth, extra_info)``) and
logs each scored sample as it is scored. verl passes the reward function neither the
step nor the prompt, so the step is counted from the calls (``samples_per_step`` =
``data.train_batch_size × actor_rollout_ref.rollout.n``) and the group comes from
``extra_info["index"]`` (verl's example preprocessing writes it). This only works when
the function runs in one process that sees every training sample in order: verl's
default synchronous reward manager. With a reward loop or ``launch_reward_fn_async``,
use the follower.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collapsewatch.importers import ImportFormatError, state_hash
from collapsewatch.importers.verl import iter_rollouts, rollout_from_record
from collapsewatch.sdk._client import Client, _load_settings, _safe_dirname
from collapsewatch.sdk._warn import RateLimitedWarnings, logger
from collapsewatch.sdk.integrations import _connect
from collapsewatch.sdk.integrations._metrics import MetricsSender
from collapsewatch.sdk.integrations.aliases import alias_metrics

__all__ = ["FollowResult", "VerlFollower", "default_state_file", "stream_rewards"]

STATE_VERSION = 1
_STEP_FILE = re.compile(r"(\d+)$")


def default_state_file(directory: str | Path, run: str) -> Path:
    """``<COLLAPSEWATCH_DATA_DIR>/follow/<run>-<hash of the folder>.json``: one state per
    (folder, run), beside the SDK's spool."""
    settings = _load_settings()
    digest = hashlib.sha1(str(Path(directory).resolve()).encode()).hexdigest()[:10]
    return Path(settings.data_dir) / "follow" / f"{_safe_dirname(run)}-{digest}.json"


@dataclass
class FollowResult:
    """What one :meth:`VerlFollower.poll` did."""

    steps_sent: list[int] = field(default_factory=list)
    """Steps whose rollouts were delivered (or spooled by the SDK) in this poll."""
    rollouts_sent: int = 0
    metric_lines: int = 0
    """Metric lines of the metrics file delivered in this poll."""
    waiting: list[int] = field(default_factory=list)
    """Step files not complete yet."""
    errors: list[str] = field(default_factory=list)
    """Files that could not be read (named, with the line and field)."""


class VerlFollower:
    """Tails a verl ``rollout_data_dir`` (and the file logger's metrics) into a run.

    Args:
        directory: verl's ``trainer.rollout_data_dir``.
        run: run name on the server.
        metrics_file: the file logger's JSON Lines (``VERL_FILE_LOGGER_PATH``); None: no
            trainer metrics.
        client: an SDK ``Client`` for ``run``; default: the follower makes one (then
            ``url``, ``api_key``, ``client_options`` apply and :meth:`close` closes it).
        state_file: where delivered steps and the metrics offset are kept; default
            :func:`default_state_file`.
        idle_seconds: a step file unchanged this long counts as complete even when no
            later step file exists (the run's last step, or a stalled run).
        success_threshold: as the verl importer's (a rollout succeeds when ``score >=``).
        flush_timeout: seconds to wait for the server per step before trying again at
            the next poll.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        run: str,
        metrics_file: str | Path | None = None,
        client: Client | None = None,
        url: str | None = None,
        api_key: str | None = None,
        state_file: str | Path | None = None,
        idle_seconds: float = 120.0,
        success_threshold: float = 1.0,
        flush_timeout: float = 60.0,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.run = run
        self.metrics_file = Path(metrics_file) if metrics_file else None
        self.idle_seconds = float(idle_seconds)
        self.success_threshold = success_threshold
        self.flush_timeout = flush_timeout
        self.state_file = Path(state_file) if state_file else default_state_file(directory, run)
        self._owns_client = client is None
        config = {"source": "verl", "rollout_data_dir": str(self.directory.resolve())}
        if client is None:
            client = Client(
                run,
                url=url,
                api_key=api_key,
                config=config,
                tags=["verl", "follow"],
                **(client_options or {}),
            )
        self.client = client
        self.metrics = MetricsSender(_connect.of_client(client)) if self.metrics_file else None
        self._warnings = RateLimitedWarnings()
        self._state = self._load_state()

    # -- state ------------------------------------------------------------------------
    def _load_state(self) -> dict[str, Any]:
        empty: dict[str, Any] = {
            "version": STATE_VERSION,
            "run": self.run,
            "directory": str(self.directory.resolve()),
            "steps": {},
            "metrics": {"offset": 0, "inode": None},
        }
        try:
            state = json.loads(self.state_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return empty
        except (OSError, ValueError) as exc:
            logger.warning(
                "collapsewatch: ignoring the unreadable follow state %s (%s); sending "
                "everything again (the server stores nothing twice)",
                self.state_file,
                exc,
            )
            return empty
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            return empty
        state.setdefault("steps", {})
        state.setdefault("metrics", {"offset": 0, "inode": None})
        return state

    def _save_state(self) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_name(f".{self.state_file.name}.tmp")
        tmp.write_text(json.dumps(self._state, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.state_file)

    @property
    def sent_steps(self) -> list[int]:
        """Steps delivered so far (this process or an earlier one with this state file)."""
        return sorted(int(s) for s in self._state["steps"])

    # -- polling ----------------------------------------------------------------------
    def _step_files(self) -> list[tuple[int, Path]]:
        found = []
        with contextlib.suppress(FileNotFoundError):
            for path in self.directory.glob("*.jsonl"):
                match = _STEP_FILE.search(path.stem)
                if match is not None and not path.name.startswith("."):
                    found.append((int(match.group(1)), path))
        return sorted(found)

    def poll(self, *, final: bool = False) -> FollowResult:
        """Send what is complete now; ``final``: the run is over, every step file is
        complete. Never raises for the server; a file that breaks the format is
        reported in ``errors`` (and tried again at the next poll)."""
        result = FollowResult()
        files = self._step_files()
        now = time.time()
        for i, (step, path) in enumerate(files):
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            sent = self._state["steps"].get(str(step))
            if (
                sent
                and sent.get("size") == stat.st_size
                and sent.get("mtime_ns") == stat.st_mtime_ns
            ):
                continue
            later = i + 1 < len(files)
            idle = now - stat.st_mtime >= self.idle_seconds
            if not (final or later or idle):
                result.waiting.append(step)
                continue
            try:
                rollouts = list(iter_rollouts(path, success_threshold=self.success_threshold))
            except (ImportFormatError, OSError, UnicodeDecodeError) as exc:
                result.errors.append(str(exc))
                self._warnings.warn("format", "collapsewatch: cannot read %s: %s", path, exc)
                continue
            by_step: dict[int, list[Any]] = {}
            for rollout in rollouts:
                by_step.setdefault(rollout.step, []).append(rollout)
            for rollout_step, items in sorted(by_step.items()):
                self.client.log_rollouts(rollout_step, items)
                self.client.complete_step(rollout_step)
            if not self.client.flush(self.flush_timeout):
                self._warnings.warn(
                    "flush",
                    "collapsewatch: step %d is not delivered yet (the server is slow or "
                    "away); it is sent again at the next poll",
                    step,
                )
                break
            self._state["steps"][str(step)] = {
                "size": stat.st_size,
                "mtime_ns": stat.st_mtime_ns,
                "rollouts": len(rollouts),
            }
            self._save_state()
            result.steps_sent.append(step)
            result.rollouts_sent += len(rollouts)
        if self.metrics_file is not None:
            result.metric_lines = self._poll_metrics(result)
        return result

    def _poll_metrics(self, result: FollowResult) -> int:
        assert self.metrics is not None and self.metrics_file is not None
        state = self._state["metrics"]
        try:
            stat = self.metrics_file.stat()
        except FileNotFoundError:
            return 0
        offset = int(state.get("offset", 0))
        if state.get("inode") != stat.st_ino or stat.st_size < offset:
            offset = 0  # a new job truncated or replaced the file: read it from the top
        if stat.st_size == offset:
            return 0
        with self.metrics_file.open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
        end = data.rfind(b"\n")
        if end < 0:
            return 0  # only a line still being written
        lines = data[: end + 1].splitlines()
        count = 0
        for no, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
                step = record["step"]
                values = record["data"]
                if isinstance(step, bool) or not isinstance(step, int) or step < 0:
                    raise ValueError(f"'step' must be an integer >= 0, got {step!r}")
                if not isinstance(values, dict):
                    raise ValueError("'data' must be an object")
            except (ValueError, KeyError, TypeError) as exc:
                why = f"{self.metrics_file}: line at byte {offset}+{no}: {exc}"
                result.errors.append(why)
                self._warnings.warn("metrics_format", "collapsewatch: skipped %s", why)
                continue
            self.metrics.log_metrics(step, alias_metrics(values, "verl"))
            count += 1
        if not self.metrics.flush(self.flush_timeout):
            return 0  # kept in memory by the sender; the offset stays, so nothing is lost
        state["offset"] = offset + end + 1
        state["inode"] = stat.st_ino
        self._save_state()
        return count

    def follow(
        self,
        *,
        poll_interval: float = 5.0,
        stop: threading.Event | None = None,
        on_poll: Callable[[FollowResult], None] | None = None,
    ) -> None:
        """Poll every ``poll_interval`` seconds until ``stop`` is set or Ctrl-C."""
        stop = stop or threading.Event()
        try:
            while not stop.is_set():
                result = self.poll()
                if on_poll is not None:
                    on_poll(result)
                stop.wait(poll_interval)
        except KeyboardInterrupt:
            pass

    def close(self, timeout: float = 30.0) -> bool:
        """Flush and close what the follower made; True when nothing was left behind."""
        ok = True
        if self.metrics is not None:
            ok = self.metrics.close(timeout) and ok
        if self._owns_client:
            ok = self.client.close(timeout) and ok
        else:
            ok = self.client.flush(timeout) and ok
        return ok

    def __enter__(self) -> VerlFollower:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# -- reward-function wrapper -------------------------------------------------------------
def stream_rewards(
    compute_score: Callable[..., Any],
    *,
    run: str,
    samples_per_step: int,
    first_step: int = 1,
    skip_splits: tuple[str, ...] = ("test", "val", "validation"),
    success_threshold: float = 1.0,
    client: Client | None = None,
    **client_kwargs: Any,
) -> Callable[..., Any]:
    """Wrap a verl custom reward function so that every training sample it scores is
    logged as a rollout, as it is scored (see the module docstring for when this works).

    Args:
        compute_score: ``(data_source, solution_str, ground_truth, extra_info=None,
            **kwargs) -> float | dict`` (a dict's ``"score"`` is the reward).
        run: run name.
        samples_per_step: ``data.train_batch_size × actor_rollout_ref.rollout.n``: the
            calls of one training step.
        first_step: the step of the first call (verl counts steps from 1).
        skip_splits: samples whose ``extra_info["split"]`` is one of these are scored but
            not logged (validation uses the same function).
        success_threshold: a rollout succeeds when its score is at least this.
        client: an SDK ``Client`` to log through; default one made with ``client_kwargs``.

    Returns:
        A function with ``compute_score``'s signature and return values. Logging never
        raises into verl; a rollout is ``{"input": question, "output": solution_str,
        "score": score}`` read by the verl importer, with ``state_id`` from
        ``extra_info["index"]`` (else the question, else the ground truth).
    """
    if samples_per_step < 1:
        raise ValueError("samples_per_step must be >= 1")
    lock = threading.Lock()
    counter = {"n": 0}
    box: dict[str, Client] = {}
    warnings = RateLimitedWarnings()

    def get_client() -> Client:
        if "c" not in box:
            box["c"] = client or Client(run, **client_kwargs)
        return box["c"]

    @functools.wraps(compute_score)
    def wrapped(
        data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **kw: Any
    ) -> Any:
        result = compute_score(data_source, solution_str, ground_truth, extra_info, **kw)
        try:
            info = extra_info if isinstance(extra_info, dict) else {}
            if str(info.get("split", "")) in skip_splits:
                return result
            with lock:
                n = counter["n"]
                counter["n"] += 1
            step = first_step + n // samples_per_step
            score = result.get("score") if isinstance(result, dict) else result
            question = str(info.get("question") or "")
            key = info.get("index")
            record = {
                "input": question,
                "output": str(solution_str),
                "score": float(score),
                "step": step,
                "request_id": f"{step}-{n % samples_per_step}",
            }
            rollout = rollout_from_record(
                record, line_no=n + 1, success_threshold=success_threshold
            )
            state = str(key) if key is not None else state_hash(question or repr(ground_truth))
            rollout = rollout.model_copy(
                update={
                    "state_id": state,
                    "metadata": {**(rollout.metadata or {}), "data_source": str(data_source)},
                }
            )
            c = get_client()
            c.log_rollouts(step, [rollout])
            if (n + 1) % samples_per_step == 0:
                c.complete_step(step)
        except Exception as exc:
            warnings.warn(
                "stream",
                "collapsewatch: could not log a scored sample (%s: %s)",
                type(exc).__name__,
                exc,
            )
        return result

    wrapped.collapsewatch_client = get_client  # type: ignore[attr-defined]
    return wrapped
