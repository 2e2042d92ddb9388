"""Benchmark: what the SDK adds to a training loop, server up and server down.

A training-loop-shaped script: each step does some work (numpy matrix products that
release the GIL and a pure-Python part that holds it, like a trainer's own Python),
builds that step's rollout dicts, and logs them. The same loop runs, in the same
process and alternating, three ways:

- ``bare``: without the SDK (the baseline);
- ``server up``: ``Client.log_rollouts`` + ``complete_step`` to a real API process
  (``collapsewatch api`` on a scratch SQLite database);
- ``server down``: the same to a URL where nothing listens (everything goes to the
  disk spool in the background).

It prints, per mode, the time of each ``log_rollouts`` call in the training thread
(p50, p99, max, and per rollout), and the loop's wall time against the bare loop: the
extra per rollout includes what the sender thread takes from the training thread (the
GIL, a CPU). Targets: under 50 µs per rollout, and no call that blocks (max far below
one step's work).

    python benchmarks/sdk_overhead.py
    python benchmarks/sdk_overhead.py --steps 300 --per-step 256 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.ingestion import make_rollouts  # noqa: E402
from collapsewatch.server import free_port  # noqa: E402


def work(matrix: np.ndarray, python_loops: int) -> float:
    """One training step's own work: BLAS (GIL released) and Python (GIL held)."""
    out = matrix
    for _ in range(4):
        out = np.tanh(out @ matrix)
    acc = 0.0
    for i in range(python_loops):
        acc += i * 0.5
    return float(out[0, 0]) + acc


def start_api(tmp: Path, cpus: set[int] | None) -> tuple[subprocess.Popen[bytes], str, str]:
    """`collapsewatch api` on a fresh SQLite database; returns (process, url, key)."""
    from collapsewatch.server import ensure_api_key
    from collapsewatch.settings import Settings
    from collapsewatch.store.migrate import upgrade

    url = f"sqlite:///{tmp / 'cw.db'}"
    upgrade(url)
    key, _ = ensure_api_key(Settings(database_url=url, data_dir=tmp))
    port = free_port()
    env = {**os.environ, "DATABASE_URL": url, "COLLAPSEWATCH_PORT": str(port)}
    log = (tmp / "api.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "collapsewatch.cli", "api"], env=env, stdout=log, stderr=log
    )
    if cpus:
        os.sched_setaffinity(proc.pid, cpus)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return proc, base, key
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"the API did not start; see {tmp / 'api.log'}")


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def loop(args: argparse.Namespace, client, templates: list[dict], tag: str) -> dict:
    """Run the training loop; returns wall time and the per-call times of log_rollouts."""
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((args.matrix, args.matrix)) / args.matrix
    calls = []
    started = time.perf_counter()
    for step in range(args.steps):
        work(matrix, args.python_loops)
        rollouts = [
            {**t, "rollout_id": f"{tag}-{step}-{i}", "step": step} for i, t in enumerate(templates)
        ]
        if client is not None:
            t0 = time.perf_counter()
            client.log_rollouts(step, rollouts)
            client.complete_step(step)
            calls.append(time.perf_counter() - t0)
    wall = time.perf_counter() - started
    return {"wall": wall, "calls": calls}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--per-step", type=int, default=128, help="rollouts per step")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--matrix", type=int, default=320, help="work: matrix size")
    parser.add_argument("--python-loops", type=int, default=150_000, help="work: Python part")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--no-pin",
        action="store_true",
        help="do not pin the training process to CPU 0 and the API to the other CPUs",
    )
    args = parser.parse_args()

    # The trainer and the server are different machines in a deployment. Here they share
    # one: the training process (its loop and the SDK's sender thread) gets CPU 0, the
    # API the rest, so the API's own work is not counted as the SDK's. BLAS gets one
    # thread, as the training loop's own core.
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    pinned = not args.no_pin and len(cpus) >= 2
    if pinned:
        os.sched_setaffinity(0, {cpus[0]})
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)

    from collapsewatch import Client

    templates = make_rollouts(args.per_step, args.turns, 8, args.per_step, seed=0)
    n = args.steps * args.per_step
    print(
        f"{platform.node()}: {os.cpu_count()} cpus, python {platform.python_version()}; "
        f"{args.steps} steps × {args.per_step} rollouts × {args.turns} turns = {n} rollouts"
    )
    print(
        f"training process on CPU {cpus[0]}, API on CPUs {cpus[1:]}"
        if pinned
        else "not pinned: training loop, sender thread and API share every CPU"
    )
    results: dict[str, list[dict]] = {"bare": [], "server up": [], "server down": []}
    with tempfile.TemporaryDirectory(prefix="cw_sdk_bench_") as tmpdir:
        tmp = Path(tmpdir)
        api, base, key = start_api(tmp, set(cpus[1:]) if pinned else None)
        try:
            for rep in range(args.repeat):
                for mode in results:
                    tag = f"{mode.replace(' ', '')}{rep}"
                    if mode == "bare":
                        results[mode].append(loop(args, None, templates, tag))
                        continue
                    client = Client(
                        f"bench-{tag}",
                        url=base if mode == "server up" else dead_url(),
                        api_key=key,
                        spool_dir=tmp / f"spool-{tag}",
                    )
                    out = loop(args, client, templates, tag)
                    t0 = time.perf_counter()
                    client.flush(timeout=300)
                    out["drain"] = time.perf_counter() - t0
                    out["stats"] = client.stats()
                    client.close(timeout=60)
                    results[mode].append(out)
        finally:
            api.terminate()
            api.wait(10)

    bare = statistics.median(r["wall"] for r in results["bare"])
    print(f"bare loop: {bare:.2f} s ({bare / args.steps * 1e3:.1f} ms per step)")
    print()
    header = (
        f"{'mode':<12}{'p50 call':>10}{'p99 call':>10}{'max call':>10}{'µs/rollout':>12}"
        f"{'loop':>8}{'vs bare':>9}{'extra µs/rollout':>18}{'after loop':>12}"
    )
    print(header)
    worst, longest = 0.0, 0.0
    for mode in ("server up", "server down"):
        calls = [c for r in results[mode] for c in r["calls"]]
        wall = statistics.median(r["wall"] for r in results[mode])
        p50, p99 = np.percentile(calls, [50, 99])
        per_rollout = p50 / args.per_step * 1e6
        extra = (wall - bare) / n * 1e6
        drain = statistics.median(r["drain"] for r in results[mode])
        worst = max(worst, p99 / args.per_step * 1e6)
        longest = max(longest, max(calls))
        print(
            f"{mode:<12}{p50 * 1e6:8.0f}µs{p99 * 1e6:8.0f}µs{max(calls) * 1e3:8.1f}ms"
            f"{per_rollout:12.2f}{wall:7.2f}s{wall / bare:9.3f}{extra:18.2f}{drain:11.2f}s"
        )
        stats = results[mode][-1]["stats"]
        print(
            f"{'':<12}last repeat: sent {stats.sent}, spooled {stats.spooled}, "
            f"spool_pending {stats.spool_pending}, dropped "
            f"{stats.dropped_full + stats.dropped_invalid + stats.dropped_rejected}"
        )
    print(
        "(call: time of log_rollouts + complete_step in the training thread; extra: the "
        "loop's slowdown per rollout, the sender thread's work on the training core "
        "included; after loop: until flush() returned)"
    )
    step = bare / args.steps
    ok = worst < 50 and longest < step
    print(
        ("PASS" if ok else "FAIL")
        + f": p99 call {worst:.1f} µs per rollout (target < 50); longest call "
        f"{longest * 1e3:.1f} ms, {'under' if longest < step else 'over'} one step's own "
        f"work ({step * 1e3:.1f} ms)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
