"""A real (tiny, CPU) PyTorch training loop reports through JobReporter; /metrics shows the MFU we compute."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mfumon.exporter.job.models import from_module
from mfumon.exporter.job.reporter import JobReporter
from tests.conftest import LiveServer

torch = pytest.importorskip("torch")

VOCAB, WIDTH, HEADS, LAYERS, SEQ, BATCH = 256, 64, 4, 2, 32, 8
PEAK_FLOPS_PER_GPU = 5e12  # a CPU has no table entry: the job states its peak


class TinyLM(torch.nn.Module):
    """A two-layer decoder, enough to train for real in a fraction of a second per step."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        layer = torch.nn.TransformerEncoderLayer(WIDTH, HEADS, 4 * WIDTH, dropout=0.0, batch_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = torch.nn.Linear(WIDTH, VOCAB, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = torch.nn.Transformer.generate_square_subsequent_mask(ids.shape[1])
        return self.head(self.blocks(self.embed(ids), mask=mask, is_causal=True))


def _metric(text: str, name: str, job_id: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels.get("job_id") == job_id:
                return float(sample.value)
    raise AssertionError(f"{name}{{job_id={job_id!r}}} not in /metrics")


def test_training_loop_mfu_in_metrics_matches_hand_computation(live_server: LiveServer) -> None:
    torch.manual_seed(0)
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ + 1))  # one batch, learned by heart
    spec = from_module(model, seq_len=SEQ).replace(layers=LAYERS, heads=HEADS, head_dim=WIDTH // HEADS)
    reporter = JobReporter(
        "e2e-tiny-lm",
        url=live_server.url,
        model=spec,
        num_gpus=2,  # as if two data-parallel ranks: tokens below are the whole job's
        dtype="fp32",
        peak_flops_per_gpu=PEAK_FLOPS_PER_GPU,
        interval_seconds=0.5,
        rank=0,
    )
    losses = []
    for _ in range(12):
        started = time.perf_counter()
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        reporter.step(2 * BATCH * SEQ, step_seconds=time.perf_counter() - started)
    assert reporter.flush(timeout_seconds=10)
    report = reporter.last_report
    assert report is not None and report["tokens"] > 0

    # By hand: PaLM App. B training FLOPs per token, MFU = tokens/s x FLOPs/token / (GPUs x peak).
    params = sum(p.numel() for p in model.parameters())  # the tied head counted once
    assert spec.params == params
    flops_per_token = 6 * params + 12 * LAYERS * HEADS * (WIDTH // HEADS) * SEQ
    tokens_per_second = report["tokens"] / report["interval_seconds"]
    expected_mfu = tokens_per_second * flops_per_token / (2 * PEAK_FLOPS_PER_GPU)

    metrics = httpx.get(f"{live_server.url}/metrics").text
    assert _metric(metrics, "mfumon_job_mfu_ratio", "e2e-tiny-lm") == pytest.approx(expected_mfu, rel=1e-6)
    assert _metric(metrics, "mfumon_job_tokens_per_second", "e2e-tiny-lm") == pytest.approx(tokens_per_second, rel=1e-6)
    assert _metric(metrics, "mfumon_job_model_flops_per_second", "e2e-tiny-lm") == pytest.approx(
        tokens_per_second * flops_per_token, rel=1e-6
    )
    assert reporter.last_response is not None
    assert reporter.last_response["flops_per_token"] == flops_per_token
    assert losses[-1] < 0.8 * losses[0]  # it really trained
    reporter.close(exit_code=0)
    assert 'job_id="e2e-tiny-lm"' not in httpx.get(f"{live_server.url}/metrics").text  # ended: series gone
