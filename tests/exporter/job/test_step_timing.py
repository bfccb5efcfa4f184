"""Step timing without timing code: input wait and exposed gradient sync from hooks, on real torch (CPU, gloo).

On the CPU the marks are wall-clock reads (on a GPU they are CUDA events: ``bench/gpu_job_timing.py`` checks that
path on a device). The sleeps below stand for a slow loader and a slow rank; assertions allow a loaded machine.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from mfumon.exporter.job.reporter import JobReporter
from mfumon.exporter.job.reporter._phases import StepPhases
from tests.conftest import reserved_port

REPO = Path(__file__).parents[3]
torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _refused_url(held_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reporters post to a port nobody listens on: reports stay queued and ``last_report`` is kept."""
    monkeypatch.setenv("MFUMON_URL", f"http://127.0.0.1:{held_port}")


def _reporter(**kwargs: Any) -> JobReporter:
    return JobReporter("timing", num_gpus=1, gpu_model=None, rank=0, start=False, **kwargs)


def _train(model: Any, reporter: JobReporter, *, steps: int, wait: float, eval_at: int | None = None) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def loader() -> Any:
        for _ in range(steps):
            time.sleep(wait)  # a slow input pipeline
            yield torch.randint(0, 100, (4, 9))

    for index, ids in enumerate(loader()):
        if index == eval_at:  # an evaluation between two steps is not input wait
            model.eval()
            with torch.no_grad():
                model(ids[:, :-1])
            time.sleep(0.3)
            model.train()
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        reporter.step(4 * 8)


def _model() -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(100, 16), torch.nn.Linear(16, 100))


def test_jobreporter_measures_input_wait_from_the_module_it_is_given() -> None:
    model = _model()
    reporter = _reporter(model=model, seq_len=8, peak_flops_per_gpu=1e12)
    _train(model, reporter, steps=6, wait=0.05, eval_at=3)
    reporter.flush(timeout_seconds=0.1)
    report = reporter.last_report
    reporter.close(timeout_seconds=0.2)
    assert report is not None
    # Each gap holds a 0.05 s wait for the loader; the gap with the 0.3 s evaluation is dropped, not averaged in.
    assert 0.045 <= report["data_wait_seconds"] < 0.2, report
    assert report["comm_seconds"] == 0.0  # one process and no process group: nothing to communicate
    assert report["step_seconds"] >= report["data_wait_seconds"]


def test_no_model_module_means_no_step_timing() -> None:
    model = _model()
    for reporter in (_reporter(model={"params": 1e6}), _reporter(model=model, step_timing=False)):
        _train(model, reporter, steps=3, wait=0.01)
        reporter.flush(timeout_seconds=0.1)
        assert reporter.last_report is not None and "data_wait_seconds" not in reporter.last_report
        assert "comm_seconds" not in reporter.last_report
        reporter.close(timeout_seconds=0.2)


def test_an_error_in_the_hooks_disables_timing_and_never_reaches_the_step(caplog: pytest.LogCaptureFixture) -> None:
    model = _model()
    reporter = _reporter(model=model)
    assert reporter._phases is not None

    class Broken:
        def mark(self) -> Any:
            raise RuntimeError("a broken clock")

        def release(self, *marks: Any) -> None:
            return None

    reporter._phases._marks = Broken()  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, logger="mfumon.exporter.job.reporter"):
        _train(model, reporter, steps=4, wait=0.0)
    assert [r.message for r in caplog.records].count("mfumon: step timing disabled after an error in its hooks") == 1
    reporter.flush(timeout_seconds=0.1)
    assert reporter.last_report is not None and reporter.last_report["tokens"] > 0
    reporter.close(timeout_seconds=0.2)


def test_sync_is_not_measured_where_it_is_not_the_exposed_one() -> None:
    phases = StepPhases(measure_sync=False).watch(_model())
    phases.backward_starting(torch.ones(1, requires_grad=True))
    assert phases.step_ended().comm_seconds is None


_DDP = """
import json, sys, time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from mfumon.exporter.job.reporter import JobReporter

def worker(rank, store, url, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(256, 256))
    delay = {"seconds": 0.0}
    if rank == 1:  # a slow rank: its gradient is ready `delay` seconds after rank 0's
        model.module.weight.register_hook(lambda grad: (time.sleep(delay["seconds"]), grad)[1])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    reporter = JobReporter("ddp", url=url, model=model, num_gpus=2, gpu_model=None, rank=rank, start=False)
    reports = {}
    for name, seconds in (("warm-up", 0.0), ("balanced", 0.0), ("slow rank", 0.2)):
        delay["seconds"] = seconds
        for _ in range(6):
            loss = model(torch.randn(16, 256)).square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            reporter.step(16)
        reporter.flush(timeout_seconds=0.05)
        reports[name] = reporter.last_report
        dist.barrier()
    if rank == 0:
        with open(out, "w") as f:
            json.dump(reports, f)
    reporter.close(timeout_seconds=0.1)
    dist.barrier()  # tear down together: a rank that left while the other still talked to it aborted in gloo once
    dist.destroy_process_group()

if __name__ == "__main__":
    torch.multiprocessing.spawn(worker, args=tuple(sys.argv[1:4]), nprocs=2)
"""


def test_ddp_exposed_gradient_sync_is_the_wait_for_the_slowest_rank(tmp_path: Path) -> None:
    script, out = tmp_path / "ddp.py", tmp_path / "reports.json"
    script.write_text(textwrap.dedent(_DDP))
    with reserved_port() as port:
        url = f"http://127.0.0.1:{port}"
        command = [sys.executable, str(script), str(tmp_path / "store"), url, str(out)]
        subprocess.run(command, cwd=REPO, check=True, timeout=300)
    reports = json.loads(out.read_text())
    balanced, waiting = reports["balanced"], reports["slow rank"]
    # Rank 0's backward is done; its all-reduce waits for rank 1's gradient, 0.2 s late: that wait is exposed sync.
    assert 0.15 <= waiting["comm_seconds"] <= waiting["step_seconds"], reports
    assert waiting["comm_seconds"] - balanced["comm_seconds"] >= 0.12, reports
    assert waiting["data_wait_seconds"] < 0.1, reports  # the slow rank's wait is not mistaken for input wait
    assert balanced["model"] == {"params": 256 * 256 + 256, "name": "Linear"}  # the model inside DDP


def test_a_checkpoint_the_loop_reports_is_not_input_wait() -> None:
    model = _model()
    reporter = _reporter(model=model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for index in range(5):
        if index == 2:
            with reporter.timed("checkpoint_save", step=index):
                time.sleep(0.5)  # a save between two steps: not the loader's fault
        time.sleep(0.02)
        ids = torch.randint(0, 100, (4, 9))
        loss = torch.nn.functional.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        reporter.step(32)
    reporter.flush(timeout_seconds=0.1)
    report = reporter.last_report
    reporter.close(timeout_seconds=0.2)
    # Counted, the 0.5 s save would lift the mean wait of the four measured gaps above 0.14 s.
    assert report is not None and 0.015 <= report["data_wait_seconds"] < 0.1, report
    assert report["step_seconds"] < 0.1, report  # the step after the save has no step time either
