"""What a sweep's driver reads and hashes, counted (issue #31 item 7): a resumed sweep hashes no unchanged model and
reads no cell's files, and what it keeps is what the first sweep found. Counts, not timings (bench/sweep.py times
the driver at 5,000 cells)."""

import json
import os

import pytest

from cmpx.outputs import OutputFailed
from cmpx.sweep import digests, window
from cmpx.sweep.digests import DigestCache
from cmpx.sweep.executors import Job
from cmpx.sweep.store import CellStore
from cmpx.sweep.writer import CellWriter
from cmpx.testing import models as modelgen

from sweep_zoo import summary, write_zoo

RUN = '[[runs]]\nname = "ref"\nargs = "--backend onnxrt --backend onnxref --iterations 1"\n'


class Counted:
    """Counts the calls of ``owner.name`` (a function or a method) and passes them on."""

    def __init__(self, monkeypatch, owner, name):
        self.calls = 0
        original = getattr(owner, name)

        def counted(*args, **kwargs):
            self.calls += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)

    def take(self) -> int:
        calls, self.calls = self.calls, 0
        return calls


def _kept(out):
    """Each cell as summary.json gives it, less what differs between running and keeping it."""
    return {(c["model"], c["run"]): {k: v for k, v in c.items() if k != "reused"} for c in summary(out)["cells"]}


def test_a_resumed_sweep_hashes_no_unchanged_model_and_reads_no_cells_files(tmp_path, run_cli, monkeypatch):
    monkeypatch.setattr(digests, "RACY_SECONDS", -1.0)  # the models were written just now; see the test below
    hashed = Counted(monkeypatch, digests, "model_digest")
    records = Counted(monkeypatch, CellStore, "record")
    reports = Counted(monkeypatch, CellStore, "report_file")
    sweep = write_zoo(tmp_path, RUN, names=("conv", "gather"))
    out = tmp_path / "out"
    assert run_cli("sweep", sweep, "--out", out).exit_code == 0
    assert (hashed.take(), records.take(), reports.take()) == (2, 2, 0)  # no earlier record: nothing kept
    first = _kept(out)

    again = run_cli("sweep", sweep, "--out", out)
    assert again.exit_code == 0 and "2 kept from an earlier sweep, 0 to run" in again.output
    assert (hashed.take(), records.take(), reports.take()) == (0, 0, 0)
    assert _kept(out) == first and all(c["reused"] for c in summary(out)["cells"])

    # A cell the index forgot (a sweep killed while it rewrote the cell's files), and a line cut short by the kill:
    # that cell is read from its files, the other from the index.
    index = out / "index.jsonl"
    with index.open("a") as f:
        f.write(json.dumps({"key": "zoo__conv.onnx--ref"}) + '\n{"key": "zoo__gather.onnx--ref", "rec')
    assert run_cli("sweep", sweep, "--out", out).exit_code == 0
    assert (hashed.take(), records.take(), reports.take()) == (0, 1, 1)
    assert _kept(out) == first
    assert len(index.read_text().splitlines()) == 2  # rewritten: one line per cell
    assert run_cli("sweep", sweep, "--out", out).exit_code == 0
    assert (hashed.take(), records.take(), reports.take()) == (0, 0, 0)

    modelgen.save(modelgen.conv_model(seed=1), tmp_path / "zoo" / "conv.onnx")  # new weights, same path
    changed = run_cli("sweep", sweep, "--out", out)
    assert changed.exit_code == 0 and "1 kept from an earlier sweep, 1 to run" in changed.output
    assert hashed.take() == 1

    index.unlink()  # results of an older cmpx: read from the cells' files once, then from the index again
    assert run_cli("sweep", sweep, "--out", out).exit_code == 0
    assert (hashed.take(), records.take(), reports.take()) == (0, 2, 2)
    assert run_cli("sweep", sweep, "--out", out).exit_code == 0
    assert (records.take(), reports.take()) == (0, 0)


def test_a_changed_model_is_hashed_again_whatever_its_size_and_mtime_say(tmp_path, monkeypatch):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"a" * 100)
    cache = DigestCache(str(tmp_path))
    first = cache.digests([str(model)])
    cache.save()
    assert cache.hashed == 1
    again = DigestCache(str(tmp_path))  # written just now: a second write in the same tick would look the same
    assert again.digests([str(model)]) == first and again.hashed == 1

    monkeypatch.setattr(digests, "RACY_SECONDS", -1.0)  # as if written long ago
    cache = DigestCache(str(tmp_path))
    cache.digests([str(model)])
    cache.save()
    kept = DigestCache(str(tmp_path))
    assert kept.digests([str(model)]) == first and kept.hashed == 0

    stat = os.stat(model)
    model.write_bytes(b"b" * 100)  # same inode and size,
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the mtime set back (cp -p, rsync -t)
    assert os.stat(model).st_mtime_ns == stat.st_mtime_ns and os.stat(model).st_ino == stat.st_ino
    changed = DigestCache(str(tmp_path))
    assert changed.digests([str(model)]) != first and changed.hashed == 1

    (tmp_path / digests.CACHE_FILE).write_text('{"format": "cmpx-sweep-digests", "models": {"%s": '
                                               '{"identity": [1, 2], "sha256": "x"}}}' % model)
    damaged = DigestCache(str(tmp_path))
    assert damaged.entries == {} and damaged.digests([str(model)]) == changed.digests([str(model)])


def _jobs(resources, count):
    return [Job(None, {}, dict(resources)) for _ in range(count)]


def test_the_ray_window_bounds_each_kind_of_cell_so_gpu_cells_never_hold_back_cpu_ones(monkeypatch):
    monkeypatch.setattr(window, "MIN_WINDOW", 1)
    gpu, cpu = _jobs({"GPU": 1}, 10), _jobs({"CPU": 1}, 10)
    sized = window.Window(gpu + cpu, None, lambda: {"CPU": 2.0, "GPU": 1.0})
    taken = list(sized.take())  # 2 x 2 CPUs of each kind, in turn; the rest wait in the driver, not in Ray
    assert [job.resources for job in taken] == [{"GPU": 1}, {"CPU": 1}] * 4 and sized.pending == 12
    assert list(sized.take()) == []
    sized.finished(taken[1])
    assert [job.resources for job in sized.take()] == [{"CPU": 1}]

    limited = window.Window(gpu + cpu, 3, lambda: {"CPU": 64.0})  # --jobs 3: three in flight in all
    assert len(list(limited.take())) == 3 and list(limited.take()) == []


def test_a_write_that_fails_on_the_writer_thread_is_raised_in_the_sweep_and_stops_the_writes():
    class FullDisk:
        saved = 0

        def save(self, *cell):
            self.saved += 1
            raise OutputFailed("--out results/cells/a/report.json: No space left on device")

    store = FullDisk()
    writer = CellWriter(store)
    writer.save(*[None] * 4)
    writer.save(*[None] * 4)  # queued before the first failed, or raises it
    with pytest.raises(OutputFailed, match="No space left"):
        writer.close()
    with pytest.raises(OutputFailed, match="No space left"):
        writer.save(*[None] * 4)
    assert store.saved == 1
