"""Framework callbacks with the real libraries (CPU): HF Trainer and Lightning runs reporting to a live server."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mfumon.exporter.job.models import count_parameters
from mfumon.exporter.job.wrap.patterns import LogParser, ParseContext
from tests.conftest import LiveServer, start_server

REPO = Path(__file__).parents[3]
BATCH, SEQ, VOCAB = 4, 16, 128


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with start_server(tmp_path_factory.mktemp("serve")) as live:
        yield live


def test_importing_integrations_imports_no_framework() -> None:
    code = (
        "import sys, mfumon.exporter.job.integrations, mfumon.exporter.job.reporter, mfumon.exporter.job.wrap.cli\n"
        "heavy = {'transformers', 'lightning', 'pytorch_lightning', 'torch', 'fastapi', 'sqlalchemy', 'api'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- Hugging Face Transformers -------------------------------------------------------------------------------


class _Slow:
    """A dataset whose items take ``seconds`` to load: the input wait the callbacks must see."""

    def __init__(self, rows: list[Any], seconds: float) -> None:
        self.rows, self.seconds = rows, seconds

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> Any:
        time.sleep(self.seconds)
        return self.rows[index]


def _hf_run(server: LiveServer, job_id: str, tmp_path: Path, load_seconds: float = 0.0, **args: Any) -> tuple[Any, Any]:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")  # the Trainer needs it
    from mfumon.exporter.job.integrations import MfumonTrainerCallback

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=SEQ, vocab_size=VOCAB)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, VOCAB, (6 * BATCH, SEQ))
    dataset = _Slow([{"input_ids": row, "labels": row} for row in ids], load_seconds)
    callback = MfumonTrainerCallback(job_id=job_id, url=server.url, peak_flops_per_gpu=1e12, interval_seconds=60)
    training_args = transformers.TrainingArguments(
        output_dir=str(tmp_path / job_id),
        max_steps=6,
        per_device_train_batch_size=BATCH,
        logging_steps=2,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        **args,
    )
    trainer = transformers.Trainer(model=model, args=training_args, train_dataset=dataset, callbacks=[callback])
    trainer.train()
    return callback, model


def _said_where(caplog: pytest.LogCaptureFixture, server: LiveServer, job_id: str) -> None:
    """The callback's reporter said once, at WARNING (seen with no logging set up), the job id and its page."""
    said = [r for r in caplog.records if "view it at" in r.getMessage()]
    assert [(r.levelno, r.getMessage()) for r in said] == [
        (logging.WARNING, f"mfumon: reporting job {job_id}, view it at {server.url}/ui/jobs/{job_id}")
    ]


def test_hf_trainer_callback_counts_tokens_from_batch_shape(
    server: LiveServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    callback, model = _hf_run(server, "hf-shape", tmp_path, disable_tqdm=True)
    _said_where(caplog, server, "hf-shape")
    report = callback.reporter.last_report
    assert report["tokens"] == 6 * BATCH * SEQ and report["step"] == 6  # every step, none lost to warm-up
    assert report["model"]["params"] == count_parameters(model) and report["model"]["seq_len"] == SEQ
    assert (report["model"]["layers"], report["model"]["heads"], report["model"]["head_dim"]) == (2, 2, 16)
    assert (report["num_gpus"], report["dtype"]) == (1, "fp32")
    job = httpx.get(f"{server.url}/v1/jobs/hf-shape").json()
    assert (job["status"], job["exit_code"]) == ("ended", 0)
    # The Trainer's own summary line, as printed, is understood by `mfumon wrap` too.
    summary = [line for line in capsys.readouterr().out.splitlines() if "train_samples_per_second" in line]
    assert summary, "the Trainer printed no summary"
    (observed,) = LogParser(ParseContext(seq_len=SEQ)).feed(summary[-1], now=0.0)
    assert observed.pattern == "hf_trainer" and observed.tokens_per_second > 0


def test_hf_trainer_callback_uses_num_input_tokens_seen(
    server: LiveServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    callback, _ = _hf_run(server, "hf-seen", tmp_path, include_num_input_tokens_seen=True, disable_tqdm=False)
    report = callback.reporter.last_report
    assert report["tokens"] == 6 * BATCH * SEQ
    job = httpx.get(f"{server.url}/v1/jobs/hf-seen").json()
    assert job["reports_received"] == 1 and job["latest"]["tokens_per_second"] > 0
    # Progress-bar mode prints formatted floats ('3319'); the per-step lines carry the token counter.
    lines = [line for line in capsys.readouterr().out.splitlines() if "train_tokens_per_second" in line]
    parser = LogParser(ParseContext())
    rates = [r for i, line in enumerate(lines) for r in parser.feed(line, now=float(i))]
    assert len(lines) >= 2 and len(rates) == len(lines) and all(r.tokens_per_second > 0 for r in rates)
    assert rates[1].tokens_per_second == 2 * BATCH * SEQ  # two steps per log line, one "second" apart


def test_hf_trainer_callback_measures_input_wait(server: LiveServer, tmp_path: Path) -> None:
    callback, _ = _hf_run(server, "hf-wait", tmp_path, load_seconds=0.01, disable_tqdm=True, dataloader_num_workers=0)
    report = callback.reporter.last_report
    # Each step's 4 samples take 0.04 s to load, fetched between on_step_end and the next on_step_begin. Steps 2-6
    # carry a wait figure; accelerate's loader fetches one batch ahead, so the last step's batch is already there:
    # 4 of the 5 measured waits hold a 0.04 s load, and sleep never returns early.
    assert report["data_wait_seconds"] >= 4 * 0.04 / 5, report
    # A step's time holds its wait, but the means are over different steps: the wait over steps 2-6, the step time
    # over all 6, the first being its compute alone (no wait figure). So the sums compare, not the means.
    assert 5 * report["data_wait_seconds"] <= 6 * report["step_seconds"], report
    assert report["comm_seconds"] == 0.0  # one process: no communication


# -- Lightning -------------------------------------------------------------------------------------------------


# Lightning 2.6 still calls a torch.utils._pytree API that torch 2.13 deprecates: not ours to fix.
@pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")
# On a machine with Slurm installed (CI starts one for the scheduler tests) Lightning warns that srun is not used.
@pytest.mark.filterwarnings("ignore:The `srun` command is available")
def test_lightning_callback_reports_a_real_fit(
    server: LiveServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    torch = pytest.importorskip("torch")
    lightning = pytest.importorskip("lightning")
    from mfumon.exporter.job.integrations import MfumonLightningCallback

    class TinyLM(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, 32)
            self.head = torch.nn.Linear(32, VOCAB)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            (ids,) = batch
            logits = self.head(self.embed(ids[:, :-1]))
            return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))

        def validation_step(self, batch: Any, batch_idx: int) -> Any:
            return self.training_step(batch, batch_idx)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    rows = list(torch.utils.data.TensorDataset(torch.randint(0, VOCAB, (5 * BATCH, SEQ))))
    loader = torch.utils.data.DataLoader(_Slow(rows, 0.01), batch_size=BATCH, num_workers=0)
    validation = torch.utils.data.DataLoader(_Slow(rows[:BATCH], 0.1), batch_size=BATCH, num_workers=0)
    callback = MfumonLightningCallback(job_id="pl-fit", url=server.url, peak_flops_per_gpu=1e12, interval_seconds=60)
    module = TinyLM()
    trainer = lightning.Trainer(
        max_steps=5,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        callbacks=[callback],
        val_check_interval=2,  # a 0.4 s validation between steps 2 and 3, and 4 and 5
        num_sanity_val_steps=0,
    )
    trainer.fit(module, loader, validation)
    _said_where(caplog, server, "pl-fit")
    report = callback.reporter.last_report
    assert report["tokens"] == 5 * BATCH * SEQ and report["step"] == 5
    # Each batch takes 0.04 s to load; the gaps that held a validation are dropped, not counted as input wait.
    assert 0.035 <= report["data_wait_seconds"] < 0.2, report
    assert report["comm_seconds"] == 0.0  # one device: no communication
    assert report["model"] == {"params": count_parameters(module), "seq_len": SEQ, "name": "TinyLM"}
    assert (report["num_gpus"], report["dtype"]) == (1, "fp32")
    job = httpx.get(f"{server.url}/v1/jobs/pl-fit").json()
    assert (job["status"], job["exit_code"]) == ("ended", 0)
