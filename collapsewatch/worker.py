"""The scoring worker: claim a settled step → score it → write metric points.

Any number of workers may share one PostgreSQL database: claims are row-locked with
``FOR UPDATE SKIP LOCKED`` and fenced by a token, so no step is scored by two workers
at once and a crashed worker's claim is taken over when its lease expires.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from collapsewatch.settings import Settings
from collapsewatch.store import queries
from collapsewatch.store.engine import make_engine, make_sessionmaker

log = logging.getLogger("collapsewatch.worker")


class Worker:
    """Scores steps from the store until stopped.

    Args:
        settings: scoring and claim settings (representation, idle time, lease).
        sessionmaker: session factory; one is made from ``settings`` if omitted.
        worker_id: name recorded on claims; defaults to ``host:pid:random``.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        sessionmaker: sessionmaker[Session] | None = None,
        worker_id: str | None = None,
    ) -> None:
        self.settings = settings
        self._own_engine = None
        if sessionmaker is None:
            self._own_engine = make_engine(settings.resolved_database_url, pool_size=2)
            sessionmaker = make_sessionmaker(self._own_engine)
        self.sessionmaker = sessionmaker
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.steps_scored = 0

    def run_once(self) -> bool:
        """Claim and score one step. Returns True if a step was claimed."""
        with self.sessionmaker() as session:
            claim = queries.claim_step(
                session=session,
                worker_id=self.worker_id,
                token=uuid.uuid4().hex,
                idle_seconds=self.settings.step_idle_seconds,
                lease_seconds=self.settings.claim_lease_seconds,
            )
        if claim is None:
            return False
        started = time.perf_counter()
        try:
            # Imported here: scikit-learn and friends load only once there is work.
            from collapsewatch.scoring import score_step

            with self.sessionmaker() as session:
                rollouts = queries.load_step_rollouts(
                    session=session, run_id=claim.run_id, step=claim.step
                )
            score = score_step(
                rollouts,
                representation=self.settings.representation,
                embed_max_texts=self.settings.embed_max_texts,
                embed_max_tokens=self.settings.embed_max_tokens,
                mi_temperature=self.settings.mi_temperature,
            )
        except Exception as exc:  # a bad step must not stop the worker
            log.exception("scoring run %s step %s failed", claim.run_id, claim.step)
            with self.sessionmaker() as session:
                queries.fail_step(session=session, claim=claim, error=repr(exc))
            return True
        with self.sessionmaker() as session:
            kept = queries.finish_step(
                session=session,
                claim=claim,
                metrics=score.metrics,
                representation=score.representation,
            )
        if kept:
            self.steps_scored += 1
            log.info(
                "scored run %s step %s (%d rollouts) in %.2fs",
                claim.run_id,
                claim.step,
                len(rollouts),
                time.perf_counter() - started,
            )
        else:
            log.warning(
                "claim on run %s step %s was taken over; result discarded", claim.run_id, claim.step
            )
        return True

    def run_forever(self, stop: threading.Event | None = None) -> None:
        """Score steps until ``stop`` is set; sleeps ``poll_interval`` when idle and backs
        off while the database is unreachable."""
        stop = stop or threading.Event()
        backoff = self.settings.poll_interval
        while not stop.is_set():
            try:
                busy = self.run_once()
                backoff = self.settings.poll_interval
            except OperationalError as exc:
                log.warning("database unavailable (%s); retrying in %.1fs", exc.orig, backoff)
                busy = False
                backoff = min(backoff * 2, 30.0)
            except Exception:  # never let one failure end the worker thread
                log.exception("worker loop error; retrying in %.1fs", backoff)
                busy = False
                backoff = min(backoff * 2, 30.0)
            if not busy:
                stop.wait(backoff)
        if self._own_engine is not None:
            self._own_engine.dispose()
