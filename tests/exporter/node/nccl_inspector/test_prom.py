"""The Prometheus textfiles of both modes: the 2.30 README and blog samples, a 2.29 file in the code's format."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from mfumon.exporter.node.nccl_inspector.bandwidth import algbw_gbs, busbw_gbs
from mfumon.exporter.node.nccl_inspector.prom import TextfileReader, gpu_uuid_of, parse_message_size, parse_textfile
from tests.exporter.node.nccl_inspector.lines import FIXTURES

PROM = FIXTURES / "prom"
#: The 2.29.3 README's label example, verbatim (README.md @ 25368a7f; it spells n_ranks where the code writes nranks).
README_2_29_LABELS = (
    'comm_id="0xd152c00f111816",collective="AllReduce",hostname="pool0-0002",rank="4",slurm_job="unknown",'
    'slurm_job_id="unknown",n_ranks="8",n_nodes="1",coll_sn="228924",timestamp="2025-10-17T03:31:47Z",'
    'gpu_device_id="GPU4",message_size="2.00GB"'
)


def _copy(case: str, into: Path) -> Path:
    (source,) = (PROM / case).glob("*.prom")
    return Path(shutil.copy(source, into / source.name))


def test_file_names_give_the_nvml_uuid() -> None:
    name = "nccl_inspector_metrics_6b1f0d3e-2a4c-4e8f-9b7d-1c2e3f4a5b6c.prom"
    assert gpu_uuid_of(name) == "GPU-6b1f0d3e-2a4c-4e8f-9b7d-1c2e3f4a5b6c"
    assert gpu_uuid_of("nccl_inspector_metrics_GPU-6b1f0d3e-2a4c-4e8f-9b7d-1c2e3f4a5b6c.prom") is None
    assert gpu_uuid_of("node-a-pid1.log") is None


def test_message_size_labels() -> None:
    assert parse_message_size("2.00GB") == 2 * 1024**3  # 2.29: the size
    assert parse_message_size("4-5GB") == 4 * 1024**3  # 2.30: the bucket's lower bound
    assert parse_message_size("512-513MB") == 512 * 1024**2
    assert parse_message_size("8192B") == 8192
    assert parse_message_size("64.00KB") == 65536
    assert parse_message_size("huge") is None


def test_the_2_30_readme_sample() -> None:
    (path,) = (PROM / "readme-2.30").glob("*.prom")
    samples, refused = parse_textfile(path.read_text())
    assert refused == 0
    coll, p2p = sorted(samples, key=lambda s: s.kind)
    assert (coll.mode, coll.kind, coll.op, coll.comm_name, coll.comm_key) == (
        "2.30",
        "coll",
        "AllReduce",
        "DP Group 0",
        "DP Group 0",
    )
    assert (coll.busbw_gbs, coll.exec_time_us, coll.algbw_gbs) == (678.263, 9498.47, None)
    assert (coll.n_ranks, coll.n_nodes, coll.node, coll.gpu, coll.slurm_job_id) == (4, 1, "nvl72004-T01", "GPU0", None)
    assert (coll.message_size, coll.message_size_bytes, coll.algo_proto, coll.version) == (
        "4-5GB",
        4 * 1024**3,
        "Ring_ll",
        "v5.1",
    )
    assert (p2p.kind, p2p.op, p2p.busbw_gbs, p2p.exec_time_us, p2p.message_size) == (
        "p2p",
        "Send",
        464.9,
        1154.87,
        "512-513MB",
    )


def test_the_2_30_blog_sample_of_a_real_job() -> None:
    (path,) = (PROM / "blog-2.30").glob("*.prom")
    samples, _ = parse_textfile(path.read_text())
    by_kind = {s.kind: s for s in samples}
    assert by_kind["coll"].comm_name is None and by_kind["coll"].comm_key == "unknown"
    assert (by_kind["coll"].op, by_kind["coll"].n_ranks, by_kind["coll"].n_nodes) == ("ReduceScatter", 32, 4)
    assert (by_kind["coll"].busbw_gbs, by_kind["coll"].exec_time_us) == (44.1181, 104164)
    assert by_kind["coll"].algo_proto == "RING_SIMPLE" and by_kind["coll"].slurm_job_id == "1670760"
    assert (by_kind["p2p"].op, by_kind["p2p"].n_ranks, by_kind["p2p"].busbw_gbs) == ("Send", 64, 19.1634)


def test_the_2_29_latest_sample_mode() -> None:
    (path,) = (PROM / "constructed-2.29").glob("*.prom")
    samples, refused = parse_textfile(path.read_text())
    assert refused == 0 and len(samples) == 2
    allreduce = next(s for s in samples if s.op == "AllReduce")
    assert (allreduce.mode, allreduce.comm_id, allreduce.comm_key, allreduce.rank, allreduce.coll_sn) == (
        "2.29",
        "0xd152c00f111816",
        "0xd152c00f111816",
        4,
        228924,
    )
    assert (allreduce.node, allreduce.gpu, allreduce.n_ranks, allreduce.timestamp) == (
        "pool0-0002",
        "GPU4",
        8,
        "2025-10-17T03:31:47Z",
    )
    assert allreduce.message_size_bytes == 2 * 1024**3
    assert (allreduce.algbw_gbs, allreduce.busbw_gbs, allreduce.exec_time_us) == (178.957, 313.175, 12000)
    # %.6g of NCCL's own definition: the file and the definitions agree.
    assert algbw_gbs("AllReduce", 2 * 1024**3, 12000, 8) == pytest.approx(178.957, rel=1e-5)
    rs = next(s for s in samples if s.op == "ReduceScatter")
    assert busbw_gbs(
        "ReduceScatter", rs.message_size_bytes or 0, rs.exec_time_us or 0, rs.n_ranks or 0
    ) == pytest.approx(rs.busbw_gbs, rel=1e-5)


def test_the_2_29_readme_label_spelling_is_read_too() -> None:
    samples, refused = parse_textfile(f"nccl_bus_bandwidth_gbs{{{README_2_29_LABELS}}} 313.175\n")
    (sample,) = samples
    assert refused == 0 and (sample.mode, sample.n_ranks, sample.coll_sn, sample.busbw_gbs) == (
        "2.29",
        8,
        228924,
        313.175,
    )


def test_an_unescaped_quote_costs_its_line_only() -> None:
    (path,) = (PROM / "readme-2.30").glob("*.prom")
    text = path.read_text()
    bad = text.splitlines()[0].replace('comm_name="DP Group 0"', 'comm_name="DP "Group" 0"')
    samples, refused = parse_textfile(bad + "\n" + text)
    assert refused == 1 and len(samples) == 2


def test_the_reader_reports_age_and_staleness(tmp_path: Path) -> None:
    fresh = _copy("readme-2.30", tmp_path)
    old = _copy("blog-2.30", tmp_path)
    now = time.time()
    os.utime(old, (now - 600, now - 600))  # a GPU with no data in the interval: NCCL leaves its file as it was
    read = TextfileReader(tmp_path, stale_after_seconds=90).read(now)
    assert read.files_seen == 2 and read.files_stale == 1 and read.files_changed == 2
    by_path = {f.path: f for f in read.files}
    assert not by_path[str(fresh)].stale
    assert by_path[str(old)].stale and by_path[str(old)].age_seconds == pytest.approx(600, abs=2)
    assert by_path[str(old)].gpu_uuid == "GPU-3f6a2b1c-9d8e-4f70-8a1b-2c3d4e5f6a7b"


def test_an_unchanged_file_is_not_parsed_again_and_a_mid_write_keeps_the_last_read(tmp_path: Path) -> None:
    path = _copy("readme-2.30", tmp_path)
    reader = TextfileReader(tmp_path)
    first = reader.read(time.time())
    again = reader.read(time.time())
    assert again.files_changed == 0 and again.files[0].samples == first.files[0].samples
    text = path.read_text()
    path.write_text(text[: len(text) // 2])  # NCCL truncates and rewrites in place: caught half-way
    racing = reader.read(time.time())
    assert racing.files_changed == 0 and racing.files[0].samples == first.files[0].samples
    assert TextfileReader(tmp_path).read(time.time()).files_unreadable == 1  # no earlier read to fall back on
    path.write_text("")
    assert TextfileReader(tmp_path).read(time.time()).files[0].samples == ()
