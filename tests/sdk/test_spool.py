"""The disk spool on its own: format, order, limits, damaged files."""

from __future__ import annotations

import json

import pytest

from collapsewatch.sdk._spool import Spool, SpoolFullError


def test_write_read_remove_oldest_first(tmp_path):
    spool = Spool(tmp_path / "s", max_bytes=10_000, run="r")
    spool.write([b'{"rollout_id":"b"}'], [2], validated=True, order_ns=2_000)
    spool.write(
        [b'{"rollout_id":"a"}', b'{"rollout_id":"a2"}'], [], validated=False, order_ns=1_000
    )
    assert (spool.pending_files, spool.pending_rollouts) == (2, 3)

    first, second = spool.paths()
    batch = spool.read(first)
    assert batch.rollouts == [b'{"rollout_id":"a"}', b'{"rollout_id":"a2"}']
    assert batch.validated is False and batch.complete_steps == []
    header = json.loads(first.read_bytes().split(b"\n")[0])
    assert header["run"] == "r" and header["n"] == 2

    spool.remove(batch)
    assert spool.paths() == [second]
    assert (spool.pending_files, spool.pending_rollouts) == (1, 1)
    assert not list((tmp_path / "s").glob(".*.tmp"))  # atomic writes leave no temp files


def test_byte_limit(tmp_path):
    spool = Spool(tmp_path, max_bytes=200, run="r")
    spool.write([b"x" * 50], [], validated=True, order_ns=1)
    with pytest.raises(SpoolFullError):
        spool.write([b"x" * 150], [], validated=True, order_ns=2)
    assert spool.pending_files == 1


def test_scan_counts_what_an_earlier_process_left(tmp_path):
    Spool(tmp_path, 10_000, "r").write([b"{}"] * 4, [1], validated=True, order_ns=1)
    (tmp_path / ".old.jsonl.tmp").write_bytes(b"half")  # a crashed write: not a batch
    again = Spool(tmp_path, 10_000, "r")
    again.scan()
    assert (again.pending_files, again.pending_rollouts) == (1, 4)
    assert again.bytes_used == (tmp_path / again.paths()[0].name).stat().st_size


def test_damaged_file_is_moved_aside(tmp_path):
    spool = Spool(tmp_path, 10_000, "r")
    (tmp_path / "00000000000000000001-1-000001.jsonl").write_bytes(b"not json\n{}\n")
    spool.scan()
    (path,) = spool.paths()
    with pytest.raises(ValueError, match="unreadable spool file"):
        spool.read(path)
    assert spool.paths() == [] and spool.pending_files == 0
    assert (tmp_path / (path.name + ".bad")).exists()


def test_partial_resend_rewrites_the_rest(tmp_path):
    spool = Spool(tmp_path, 10_000, "r")
    spool.write([b"1", b"2", b"3"], [0], validated=True, order_ns=1)
    batch = spool.read(spool.paths()[0])
    spool.replace(batch, [b"3"], [0])
    again = spool.read(spool.paths()[0])
    assert again.rollouts == [b"3"] and again.complete_steps == [0]
    assert spool.pending_rollouts == 1
