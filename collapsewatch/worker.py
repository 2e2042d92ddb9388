"""The scoring worker: claim a settled step → score it → detect → notify.

After a step's metric points are written, the run's settled series is replayed through
the detectors (collapsewatch.detect); alert state changes not stored before are stored
and queued for the project's sinks in the same transaction (an outbox), and the loop
delivers due notifications between steps.

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
from typing import Any

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from collapsewatch.settings import Settings
from collapsewatch.store import queries
from collapsewatch.store.engine import make_engine, make_sessionmaker

log = logging.getLogger("collapsewatch.worker")

# Rules whose evidence includes example rollouts that share one template.
EXAMPLE_RULES = frozenset({"template_collapse", "entropy_collapse", "degenerate_text"})


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
        self.alert_changes = 0
        self._detector_settings: Any = None
        self._alert_settings: Any = None
        # Read now: a bad sink configuration (say a webhook URL without a valid secret)
        # stops the worker at start with the settings error, not on every loop.
        _ = self.alert_settings, self.detector_settings

    @property
    def detector_settings(self) -> Any:
        """Detector thresholds (COLLAPSEWATCH_DETECT_*), read once."""
        if self._detector_settings is None:
            from collapsewatch.detect import DetectorSettings

            self._detector_settings = DetectorSettings()
        return self._detector_settings

    @property
    def alert_settings(self) -> Any:
        """Sink settings (Slack/webhook URLs, retries), read once."""
        if self._alert_settings is None:
            from collapsewatch.alerts import AlertSettings

            self._alert_settings = AlertSettings()
        return self._alert_settings

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
                cross_scores = queries.load_cross_scores(
                    session=session, run_id=claim.run_id, step=claim.step
                )
            if not rollouts:  # cross-scores arrived before any rollout of the step
                with self.sessionmaker() as session:
                    queries.fail_step(session=session, claim=claim, error="no rollouts yet")
                return True
            score = score_step(
                rollouts,
                cross_scores=cross_scores,
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
                commit=False,
            )
            changes: list[queries.AlertChange] = []
            if kept:
                # Same transaction: a step reads as scored only with its alerts stored.
                try:
                    changes = self._evaluate(session, claim.run_id)
                    session.commit()
                except Exception as exc:
                    # A detector failure must not wedge the step (its claim would be
                    # retaken forever): store the metrics and say what failed.
                    log.exception("alert evaluation of run %s failed", claim.run_id)
                    session.rollback()
                    kept = queries.finish_step(
                        session=session,
                        claim=claim,
                        metrics=score.metrics,
                        representation=score.representation,
                        error=f"alert evaluation failed: {exc!r}",
                    )
        if not kept:
            log.warning(
                "claim on run %s step %s was taken over; result discarded", claim.run_id, claim.step
            )
            return True
        self.steps_scored += 1
        log.info(
            "scored run %s step %s (%d rollouts) in %.2fs",
            claim.run_id,
            claim.step,
            len(rollouts),
            time.perf_counter() - started,
        )
        self._log_changes(claim.run_id, changes)
        # A worker that scored a neighbouring step at the same moment could not see this
        # one's commit; if the settled prefix grew past what was replayed, replay again
        # (idempotent) so the last steps of a run are never left unevaluated.
        with self.sessionmaker() as session:
            last = queries.settled_last_step(session=session, run_id=claim.run_id)
        if last is not None and last > claim.step:
            self.evaluate_alerts(claim.run_id)
        return True

    def evaluate_alerts(self, run_id: int) -> int:
        """Replay the run's settled series through the detectors and store what changed,
        in its own transaction. Returns the number of alert state changes."""
        with self.sessionmaker() as session:
            changes = self._evaluate(session, run_id)
            session.commit()
        self._log_changes(run_id, changes)
        return len(changes)

    def _evaluate(self, session: Session, run_id: int) -> list[queries.AlertChange]:
        """Replay and store in the caller's transaction (no commit).

        The series-derived metrics (EMA z-score) are written first; each new firing of
        a text rule gets example rollouts from different states that share a template
        (the evidence a user reads first); each change is queued for the project's
        sinks (outbox), so it is delivered exactly when the change commits.
        """
        from collapsewatch.alerts import enqueue
        from collapsewatch.detect import replay, template_examples
        from collapsewatch.metrics.series import series_metrics

        series = queries.settled_series(session=session, run_id=run_id)
        if not series:
            return []
        self._store_series_metrics(session, run_id, series, series_metrics(series))
        events = replay(series, self._detector_settings_for(session, run_id))
        changes = queries.record_alert_events(session=session, run_id=run_id, events=events)
        for change in changes:
            if change.transition == "firing" and change.rule in EXAMPLE_RULES:
                rollouts = queries.load_step_rollouts(
                    session=session, run_id=run_id, step=change.step
                )
                queries.add_alert_evidence(
                    session=session,
                    alert_id=change.alert_id,
                    extra={"examples": template_examples(rollouts)},
                )
                session.flush()
            enqueue(
                session,
                alert_id=change.alert_id,
                transition=change.transition,
                settings=self.alert_settings,
            )
        return changes

    def _detector_settings_for(self, session: Session, run_id: int) -> Any:
        """The worker's detector settings with the run's project overrides applied
        (set through ``PUT /api/v1/detector-settings``; validated when stored)."""
        overrides = queries.detector_overrides(session=session, run_id=run_id)
        if not overrides:
            return self.detector_settings
        return self.detector_settings.model_copy(update=overrides)

    def _log_changes(self, run_id: int, changes: list[queries.AlertChange]) -> None:
        for change in changes:
            log.warning(
                "alert %s %s on run %s at step %s",
                change.rule,
                change.transition,
                run_id,
                change.step,
            )
        self.alert_changes += len(changes)

    @staticmethod
    def _store_series_metrics(
        session: Session,
        run_id: int,
        series: dict[int, dict[str, float | None]],
        derived: dict[int, dict[str, float | None]],
    ) -> None:
        """Merge the series-derived metrics (EMA z-score) into ``series`` and write the
        points not written yet: they depend only on earlier steps, so they never change
        once a step is in the settled prefix."""
        for step, values in derived.items():
            missing = {k: v for k, v in values.items() if k not in series[step]}
            series[step].update(values)
            if missing:
                queries.write_metric_points(
                    session=session,
                    run_id=run_id,
                    step=step,
                    metrics=missing,
                    representation=None,
                )

    def deliver_alerts(self) -> int:
        """Send due alert notifications (retries included); returns how many were tried."""
        from collapsewatch.alerts import deliver_due

        return deliver_due(self.sessionmaker, self.alert_settings)

    def run_forever(self, stop: threading.Event | None = None) -> None:
        """Score steps until ``stop`` is set; sleeps ``poll_interval`` when idle and backs
        off while the database is unreachable."""
        stop = stop or threading.Event()
        backoff = self.settings.poll_interval
        while not stop.is_set():
            try:
                busy = self.run_once()
                busy = self.deliver_alerts() > 0 or busy
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
