"""The schema comes from Alembic and matches the tables (``mfumon.api.db.tables``); migrations go down and up again."""

from __future__ import annotations

import json
import logging
import time

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from mfumon.api.crud.nodes import NodeWrite, decode_sample, upsert_nodes
from mfumon.api.db.migrate import alembic_config, upgrade_to_head
from mfumon.api.db.session import make_engine, make_sessionmaker
from mfumon.api.db.tables import Base, NodeRow
from mfumon.api.state.devices import DeviceResolver
from mfumon.api.state.notify import MIRRORED
from mfumon.api.state.refresh import Refresher
from mfumon.api.state.store import ClusterState
from mfumon.mfu import PeakTable
from tests.utils.factories import node_sample


def test_migrations_create_exactly_the_tables(database_url: str) -> None:
    upgrade_to_head(database_url)
    upgrade_to_head(database_url)  # idempotent: a second replica starting finds nothing to do
    engine = create_engine(database_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert diff == []
    command.downgrade(alembic_config(database_url), "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    upgrade_to_head(database_url)
    assert {"nodes", "jobs", "job_reports", "baselines"} <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_node_gpu_rows_move_into_the_node_document_and_back(database_url: str) -> None:
    """0009 carries a database written before it (one row per GPU) into one document per node, and back down."""
    config = alembic_config(database_url)
    command.upgrade(config, "0008_managed_baselines")
    engine = create_engine(database_url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO nodes (name, pool, last_seen_at, last_sample_timestamp, samples_received, updated_at, "
                "ib_ports) VALUES ('n1', 'train', 1.7e9, 1.7e9, 3, 1.7e9, :ports)"
            ),
            {"ports": json.dumps([{"device": "mlx5_0", "port": 1, "state": "ACTIVE", "link_downed_total": 2}])},
        )
        conn.execute(
            text(
                'INSERT INTO gpus (uuid, node, "index", name, mig_profile, job_id, up, counters, sample_timestamp) '
                "VALUES ('GPU-b', 'n1', 1, 'NVIDIA H100 80GB HBM3', NULL, 'j1', true, :c1, 1.7e9), "
                "('GPU-a', 'n1', 0, 'NVIDIA H100 80GB HBM3', NULL, NULL, false, :c0, 1.7e9)"
            ),
            {"c1": json.dumps({"power_watts": 500.0, "tensor_active": 0.5}), "c0": "{}"},
        )
    upgrade_to_head(database_url)
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT sample, samples_received FROM nodes WHERE name = 'n1'")).one()
    sample = decode_sample(stored.sample)
    gpus = sample.gpus
    assert (sample.timestamp, sample.pool) == (1.7e9, "train")
    assert sample.ib_ports is not None and [(p.device, p.link_downed_total) for p in sample.ib_ports] == [("mlx5_0", 2)]
    assert [(g.uuid, g.index, g.job_id, g.up) for g in gpus] == [("GPU-a", 0, None, False), ("GPU-b", 1, "j1", True)]
    assert gpus[1].counters() == {"power_watts": 500.0, "tensor_active": 0.5} and stored.samples_received == 3
    command.downgrade(config, "0008_managed_baselines")
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT uuid, job_id, counters FROM gpus ORDER BY uuid")).all()
        ports = conn.execute(text("SELECT ib_ports FROM nodes")).scalar_one()
    ports = json.loads(ports) if isinstance(ports, str) else ports
    assert ports == [{"device": "mlx5_0", "port": 1, "state": "ACTIVE", "link_downed_total": 2}]
    assert [(r.uuid, r.job_id) for r in rows] == [("GPU-a", None), ("GPU-b", "j1")]
    counters = rows[1].counters  # PostgreSQL's driver decodes JSON, SQLite's does not
    assert (json.loads(counters) if isinstance(counters, str) else counters) == {
        "power_watts": 500.0,
        "tensor_active": 0.5,
    }
    engine.dispose()


def test_every_mirrored_table_notifies_and_is_read_back(database_url: str) -> None:
    """The one list of mirrored tables (mfumon.api.state.notify.MIRRORED), the migrations' triggers and the refresher's
    readers agree: a table added to one and not the others fails here, not silently on a replica."""
    changed_calls: list[dict[str, object]] = []

    class Recorder(Refresher):
        def __init__(self) -> None:  # nothing to read from: only which reader a table reaches
            pass

        def load_rows(self, **kwargs: object) -> int:  # type: ignore[override]
            changed_calls.append(kwargs)
            return 0

    for table in MIRRORED:
        Recorder().load_changed({table: {"some-key"}})
        assert any(changed_calls[-1].values()), f"Refresher.load_changed ignores mirrored table {table}"
    upgrade_to_head(database_url)
    if not database_url.startswith("postgresql"):
        return  # one process, no replicas, no triggers
    engine = create_engine(database_url)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT event_object_table, event_manipulation FROM information_schema.triggers "
                "WHERE trigger_name LIKE 'mfumon_notify_%'"
            )
        ).all()
    engine.dispose()
    triggers = {(table, operation) for table, operation in rows}
    assert triggers == {(table, operation) for table in MIRRORED for operation in ("INSERT", "UPDATE")}


def test_the_node_sample_is_compressed_with_lz4_on_postgresql(database_url: str) -> None:
    """Each flush rewrites every pushed node's ~3 KB sample; lz4 costs PostgreSQL about half what pglz did."""
    upgrade_to_head(database_url)
    if not database_url.startswith("postgresql"):
        return
    engine = create_engine(database_url)
    query = text("SELECT attcompression FROM pg_attribute WHERE attrelid = 'nodes'::regclass AND attname = 'sample'")
    with engine.connect() as conn:
        assert conn.execute(query).scalar_one() == "l"
    command.downgrade(alembic_config(database_url), "0010_change_notifications")
    with engine.connect() as conn:
        assert conn.execute(query).scalar_one() == ""  # the server's default again
    upgrade_to_head(database_url)
    engine.dispose()


def _hot_updates(database_url: str, prefix: str) -> tuple[int, int]:
    """Rows updated and how many of those were HOT updates, over three flushes of 20 nodes written before."""
    engine = make_engine(database_url)
    sessions = make_sessionmaker(engine)
    body = json.dumps(node_sample())
    names = [f"{prefix}-{n}" for n in range(20)]
    counts = text(
        "SELECT pg_stat_get_xact_tuples_updated('nodes'::regclass), "
        "pg_stat_get_xact_tuples_hot_updated('nodes'::regclass)"
    )
    with sessions.begin() as session:  # the first write of each node: inserts
        upsert_nodes(session=session, writes=[NodeWrite(n, "p", body, 1.0, 1.0, 1) for n in names], now=1.0)
        before = session.execute(counts).one()
    for flush in range(2, 5):
        with sessions.begin() as session:
            writes = [NodeWrite(n, "p", body, float(flush), float(flush), 1) for n in names]
            upsert_nodes(session=session, writes=writes, now=float(flush))
            after = session.execute(counts).one()  # counted per connection until the statistics are sent
    engine.dispose()
    return after[0] - before[0], after[1] - before[1]


def test_node_rows_are_updated_in_place_on_postgresql(database_url: str) -> None:
    """Each flush rewrites every pushed node's row: with no index on a column it changes and room on the page, an
    update is a HOT update (no index entry, no bloat), where before 0017 none could be; the index is gone on SQLite
    too. Downgrading restores both."""
    upgrade_to_head(database_url)
    engine = make_engine(database_url)
    assert "ix_nodes_updated_at" not in {index["name"] for index in inspect(engine).get_indexes("nodes")}
    postgres = database_url.startswith("postgresql")
    options = text("SELECT reloptions FROM pg_class WHERE relname = 'nodes'")
    if postgres:
        declared = NodeRow.__table__.dialect_options["postgresql"]["with"]
        with engine.connect() as conn:
            assert conn.execute(options).scalar_one() == [f"{k}={v}" for k, v in declared.items()] == ["fillfactor=50"]
        updated, hot = _hot_updates(database_url, "head")
        assert updated >= 60 and hot >= 0.9 * updated  # nearly all: a page is pruned once no snapshot sees it
    command.downgrade(alembic_config(database_url), "0016_job_profiles")
    assert "ix_nodes_updated_at" in {index["name"] for index in inspect(engine).get_indexes("nodes")}
    if postgres:
        with engine.connect() as conn:
            assert conn.execute(options).scalar_one() is None
        # Today's upsert writes the node's software too (0020): the column, added by hand to the 0016 table, is
        # indexed by nothing, so it changes nothing HOT depends on.
        with engine.begin() as conn:
            conn.execute(text("ALTER TABLE nodes ADD COLUMN software JSON"))
        updated, hot = _hot_updates(database_url, "before")
        assert updated >= 60 and hot == 0
        with engine.begin() as conn:
            conn.execute(text("ALTER TABLE nodes DROP COLUMN software"))
    upgrade_to_head(database_url)
    engine.dispose()


def test_node_software_column_comes_and_goes_keeping_the_rows(database_url: str) -> None:
    """0020 adds ``nodes.software`` (NULL for the nodes already there, until their agent reports one); downgrading
    drops it and keeps the rows."""
    config = alembic_config(database_url)
    command.upgrade(config, "0019_job_software")
    engine = create_engine(database_url)
    body = json.dumps(node_sample(1))
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO nodes (name, pool, last_seen_at, last_sample_timestamp, samples_received, updated_at, "
                "sample) VALUES ('n1', 'p', 1.0, 1.0, 1, 1.0, :body)"
            ),
            {"body": body},
        )
    command.upgrade(config, "0020_node_software")
    software = [{"component": "driver", "version": "550.54.15"}]
    writer = make_engine(database_url)
    sessions = make_sessionmaker(writer)
    with sessions.begin() as session:
        assert session.get(NodeRow, "n1").software is None  # type: ignore[union-attr]
        upsert_nodes(session=session, writes=[NodeWrite("n1", "p", body, 2.0, 2.0, 1, software)], now=2.0)
    with sessions() as session:
        assert session.get(NodeRow, "n1").software == software  # type: ignore[union-attr]
    writer.dispose()
    command.downgrade(config, "0019_job_software")
    assert "software" not in {c["name"] for c in inspect(engine).get_columns("nodes")}
    with engine.connect() as conn:
        assert conn.execute(text("SELECT samples_received FROM nodes WHERE name = 'n1'")).scalar_one() == 2
    upgrade_to_head(database_url)
    engine.dispose()


def test_a_row_stored_under_laxer_rules_is_skipped_not_fatal(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A sample stored before request types were strict ("up": 1, a number as a string) no longer validates; the
    state load leaves that node out with a warning and loads the rest, instead of failing every replica's start."""
    upgrade_to_head(database_url)
    now = time.time()
    good, lax = node_sample(2), node_sample(2)
    lax["gpus"][0]["up"] = 1
    lax["gpus"][1]["power_watts"] = "550"
    engine = make_engine(database_url)
    sessions = make_sessionmaker(engine)
    with sessions.begin() as session:
        for name, body in (("good", good), ("lax", lax)):
            session.add(
                NodeRow(
                    name=name,
                    pool="train",
                    last_seen_at=now,
                    last_sample_timestamp=body["timestamp"],
                    samples_received=1,
                    updated_at=now,
                    sample=json.dumps(body),
                )
            )
    state = ClusterState(
        node_ttl_seconds=600,
        job_ttl_seconds=600,
        pending_job_ttl_seconds=600,
        health_window_seconds=600,
        scheduler_ttl_seconds=600,
    )
    refresher = Refresher(state, sessions, DeviceResolver(PeakTable()), overlap_seconds=5)
    with caplog.at_level(logging.WARNING, logger="mfumon.api.state.refresh"):
        assert refresher.load() >= 1
    assert state.node("good") is not None and state.node("lax") is None
    assert any(
        "lax" in record.getMessage() and "no longer validates" in record.getMessage() for record in caplog.records
    )
    assert refresher.watermark >= now  # the skipped row is not read again until its node pushes
    engine.dispose()
