"""Rate-limited warnings: one line per kind of trouble per interval, never one per rollout."""

from __future__ import annotations

import logging
import threading
import time

logger = logging.getLogger("collapsewatch")

# Seconds between two warnings of one kind; the ones in between are counted and
# their number is given with the next one.
WARN_INTERVAL = 10.0


class RateLimitedWarnings:
    """Emits the first warning of each kind at once, then at most one per interval."""

    def __init__(self, interval: float = WARN_INTERVAL) -> None:
        self._interval = interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warn(self, kind: str, message: str, *args: object, level: int = logging.WARNING) -> None:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self._interval:
                self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
                return
            self._last[kind] = now
            suppressed = self._suppressed.pop(kind, 0)
        if suppressed:
            message += " [%d similar warnings suppressed]"
            args = (*args, suppressed)
        logger.log(level, message, *args)

    def report_suppressed(self) -> None:
        """Say how many warnings were held back since the last one (at close)."""
        with self._lock:
            pending = {k: n for k, n in self._suppressed.items() if n}
            self._suppressed.clear()
        for kind, n in sorted(pending.items()):
            logger.warning("collapsewatch: %d more '%s' warnings were suppressed", n, kind)
