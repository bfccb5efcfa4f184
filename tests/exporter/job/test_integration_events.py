"""Job events sent without user code: the HF and Lightning callbacks time checkpoints and evaluation, resume from a
checkpoint, and the reporter sends start-up, restarts and failures. Real libraries on the CPU, a live aggregator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer, start_server

BATCH, SEQ, VOCAB = 4, 16, 128


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with start_server(tmp_path_factory.mktemp("serve")) as live:
        yield live


def _events(server: LiveServer, job_id: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{server.url}/v1/jobs/{job_id}/events")
    response.raise_for_status()
    return response.json()["data"]


def test_hf_trainer_sends_eval_checkpoint_and_resume_events(server: LiveServer, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from mfumon.exporter.job.integrations import MfumonTrainerCallback

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=SEQ, vocab_size=VOCAB)
    ids = torch.randint(0, VOCAB, (8 * BATCH, SEQ))
    dataset = [{"input_ids": row, "labels": row} for row in ids]

    def run(max_steps: int, resume: bool) -> None:
        callback = MfumonTrainerCallback(job_id="hf-events", url=server.url, peak_flops_per_gpu=1e12)
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path / "out"),
            max_steps=max_steps,
            per_device_train_batch_size=BATCH,
            per_device_eval_batch_size=BATCH,
            eval_strategy="steps",
            eval_steps=3,
            save_strategy="steps",
            save_steps=3,
            report_to="none",
            use_cpu=True,
            disable_tqdm=True,
        )
        model = transformers.GPT2LMHeadModel(config)
        trainer = transformers.Trainer(
            model=model, args=args, train_dataset=dataset, eval_dataset=dataset[:BATCH], callbacks=[callback]
        )
        trainer.train(resume_from_checkpoint=resume or None)

    run(max_steps=6, resume=False)
    first = _events(server, "hf-events")
    assert [(e["type"], e["step"]) for e in first] == [
        ("init", None),
        ("eval", 3),
        ("checkpoint_save", 3),
        ("eval", 6),
        ("checkpoint_save", 6),
    ]
    assert all(e["seconds"] is not None and e["seconds"] >= 0 for e in first)
    assert httpx.get(f"{server.url}/v1/jobs/hf-events").json()["outcome"] == "success"

    run(max_steps=9, resume=True)  # the job comes back, resumed from its step-6 checkpoint
    second = _events(server, "hf-events")[len(first) :]
    assert [e["type"] for e in second][:3] == ["restart", "checkpoint_load", "init"]
    assert second[0]["inferred"] and second[1]["step"] == 6  # the load reached the ended job: a restart
    assert [(e["type"], e["step"]) for e in second[3:]] == [("eval", 9), ("checkpoint_save", 9)]
    job = httpx.get(f"{server.url}/v1/jobs/hf-events").json()
    assert (job["restarts"], job["status"], job["outcome"]) == (1, "ended", "success")


# Lightning 2.6 still calls a torch.utils._pytree API that torch 2.13 deprecates: not ours to fix.
@pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")
# Lightning warns when a Slurm `srun` is installed but not used (a machine with Slurm tools, like CI's): not a bug.
@pytest.mark.filterwarnings("ignore:The `srun` command is available:UserWarning")
# The resumed run saves into the directory it resumes from, as a requeued job does.
@pytest.mark.filterwarnings("ignore:Checkpoint directory .* exists and is not empty:UserWarning")
@pytest.mark.filterwarnings("ignore:You're resuming from a checkpoint that ended before the epoch ended:UserWarning")
def test_lightning_sends_eval_checkpoint_resume_and_failure_events(server: LiveServer, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    lightning = pytest.importorskip("lightning")
    from mfumon.exporter.job.integrations import MfumonLightningCallback

    class TinyLM(lightning.LightningModule):
        def __init__(self, fail_at: int | None = None) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, 32)
            self.head = torch.nn.Linear(32, VOCAB)
            self.fail_at = fail_at

        def _loss(self, batch: Any) -> Any:
            (ids,) = batch
            logits = self.head(self.embed(ids[:, :-1]))
            return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            if self.fail_at is not None and self.global_step >= self.fail_at:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            return self._loss(batch)

        def validation_step(self, batch: Any, batch_idx: int) -> Any:
            return self._loss(batch)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randint(0, VOCAB, (8 * BATCH, SEQ)))
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, num_workers=0)

    def fit(max_steps: int, module: Any, ckpt_path: str | None = None) -> None:
        callback = MfumonLightningCallback(job_id="pl-events", url=server.url, peak_flops_per_gpu=1e12)
        saving = lightning.pytorch.callbacks.ModelCheckpoint(
            dirpath=str(tmp_path / "ckpt"), every_n_train_steps=2, save_top_k=-1
        )
        trainer = lightning.Trainer(
            max_steps=max_steps,
            accelerator="cpu",
            devices=1,
            logger=False,
            val_check_interval=4,
            limit_val_batches=1,
            num_sanity_val_steps=0,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=str(tmp_path),
            callbacks=[callback, saving],
        )
        trainer.fit(module, loader, loader, ckpt_path=ckpt_path)

    fit(4, TinyLM())
    first = _events(server, "pl-events")
    kinds = [e["type"] for e in first]
    assert kinds[0] == "init" and kinds.count("checkpoint_save") >= 2 and "eval" in kinds
    assert all(e["seconds"] is not None for e in first if e["type"] in ("checkpoint_save", "eval"))

    with pytest.raises(RuntimeError, match="illegal memory access"):
        fit(8, TinyLM(fail_at=6), ckpt_path=str(tmp_path / "ckpt" / "epoch=0-step=4.ckpt"))
    second = _events(server, "pl-events")[len(first) :]
    assert [e["type"] for e in second][:2] == ["restart", "checkpoint_load"] and second[1]["step"] == 4
    assert second[-1]["type"] == "failure" and second[-1]["exit_code"] == 1
    job = httpx.get(f"{server.url}/v1/jobs/pl-events").json()
    assert (job["restarts"], job["failures"], job["outcome"]) == (1, 1, "failure")


def test_wrap_sends_restart_init_and_failure(server: LiveServer, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    child = tmp_path / "train.py"
    child.write_text(
        "import sys\n"
        "print(' iteration       10/    1000 | elapsed time per iteration (ms): 500.0 |"
        " throughput per GPU (TFLOP/s/GPU): 100.0 | global batch size:    16 |')\n"
        "sys.exit(3)\n"
    )
    env = {**os.environ, "SLURM_RESTART_COUNT": "1"}
    command = [sys.executable, "-m", "mfumon", "wrap", "--url", server.url, "--job-id", "wrap-events"]
    command += ["--num-gpus", "2", "--peak-flops-per-gpu", "1e15", "--", sys.executable, str(child)]
    command += ["--seq-length", "1024"]
    result = subprocess.run(command, env=env, capture_output=True, timeout=60, cwd=Path(__file__).parents[3])
    assert result.returncode == 3, result.stderr.decode()
    events = _events(server, "wrap-events")
    assert [e["type"] for e in events] == ["restart", "init", "failure"]
    assert events[1]["seconds"] >= 0 and events[2]["exit_code"] == 3
    job = httpx.get(f"{server.url}/v1/jobs/wrap-events").json()
    assert (job["outcome"], job["restarts"], job["failures"]) == ("failure", 1, 1)
