"""A node sample, end to end: store the node's rows, then replace its view in this process's state."""

from __future__ import annotations

from api.context import AppContext
from api.crud.nodes import record_node_sample
from api.schemas.nodes import NodeSampleCreate
from api.state.views import GpuView, build_node_view


def record_sample(ctx: AppContext, node: str, sample: NodeSampleCreate) -> bool:
    """Store one push; returns False when it was older than the state already applied."""
    now = ctx.clock()
    held = ctx.state.node(node)
    with ctx.sessions.begin() as session:
        row, applied = record_node_sample(session=session, node=node, sample=sample, now=now)
    if applied:
        gpus = tuple(
            GpuView(
                uuid=gpu.uuid,
                node=node,
                index=gpu.index,
                name=gpu.name,
                mig_profile=gpu.mig_profile,
                job_id=gpu.job_id,
                up=gpu.up,
                counters=gpu.counters() if gpu.up else {},
                sample_timestamp=sample.timestamp,
                device=(resolved := ctx.resolver.resolve(gpu.name, gpu.mig_profile))[0],
                bf16_peak_flops=resolved[1],
            )
            for gpu in sorted(sample.gpus, key=lambda g: (g.index, g.uuid))
        )
        ib_ports = None if row.ib_ports is None else tuple(row.ib_ports)
    elif held is not None:
        gpus, ib_ports = held.gpus, held.ib_ports
    else:
        # Another replica holds newer GPU state that this one has not loaded: leave the node to the refresh,
        # which sees a revision it does not hold and reads the node's rows in full.
        ctx.self_metrics.count_gpu_samples(len(sample.gpus))
        return applied
    ctx.state.apply_node(
        build_node_view(
            name=node,
            pool=row.pool,
            last_seen_at=now,
            last_sample_timestamp=row.last_sample_timestamp,
            samples_received=row.samples_received,
            updated_at=now,
            gpus=gpus,
            ib_ports=ib_ports,
        )
    )
    ctx.self_metrics.count_gpu_samples(len(sample.gpus))
    return applied
