"""The package's imports run one way, its errors form one tree, and each concern lives in one place.

Walks every module of ``mfumon`` (the repository's ``api/``, ``exporter/``, ``migrations/`` and ``mfumon/``, named
as ``[tool.setuptools] package-dir`` in pyproject.toml installs them) and fails on a forbidden arrow, naming the file
and the import:

- the node side, the job side, the scheduler adapters and ``mfumon report`` never import each other's parts or the
  demo; nothing in ``exporter/`` imports the aggregator or its migrations (the demo starts ``mfumon serve`` as a
  process); the MFU engine (``mfumon.mfu``) imports neither side;
- the aggregator imports ``mfumon.migrations`` only in its migration runner, ``api/db/migrate.py``;
- routes reach storage only through services (no route imports ``mfumon.api.crud``);
- every exception class the aggregator defines derives from ``MfumonError``, and exception handlers are registered
  in ``api/handlers.py`` alone;
- one module, ``api/server/protocol.py``, touches uvicorn's, h11's or asyncio's internals (imports h11, uvicorn's
  protocols or asyncio's transports, or uses a member they do not publish); the door of ``mfumon serve`` and the
  app's fast door import no route and no route dependency (they call the ingest service).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest's own dependency there
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]

_SETUPTOOLS = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
#: repository folder -> the package name it is installed as (pyproject.toml's package-dir, turned around)
PACKAGES = {folder: package for package, folder in _SETUPTOOLS["package-dir"].items()}


@dataclass(frozen=True)
class Module:
    path: Path  # relative to the repository
    name: str  # dotted, as installed
    imports: frozenset[str]


def _module_name(path: Path) -> str:
    """The dotted name ``path`` (relative to the repository) is installed as, through the deepest mapped folder."""
    folder = max((Path(f) for f in PACKAGES if path.is_relative_to(f)), key=lambda f: len(f.parts))
    parts = [*PACKAGES[folder.as_posix()].split("."), *path.relative_to(folder).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str) -> frozenset[str]:
    """Every module ``path`` imports, at any depth in the file, relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return frozenset(found)


def _walk() -> list[Module]:
    modules = []
    for top in PACKAGES:
        for path in sorted((REPO / top).rglob("*.py")):
            relative = path.relative_to(REPO)
            name = _module_name(relative)
            modules.append(Module(relative, name, _imports(path, name)))
    return modules


MODULES = _walk()


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


SERVER_INTERNALS = "mfumon.api.server.protocol"
"""The one module of the aggregator that touches uvicorn's, h11's or asyncio's internals (its ``RELIED_ON``)."""
INTERNAL_PACKAGES = ("h11", "uvicorn.protocols", "uvicorn.server", "uvicorn.config", "asyncio.selector_events")
"""Modules whose use is the server's internals: what ``mfumon serve``'s protocol subclasses and patches."""
INTERNAL_MEMBERS = frozenset(
    {
        "_read_ready_cb",  # asyncio's socket transport
        "_unset_keepalive_if_required",  # uvicorn's H11Protocol
        "timeout_keep_alive_handler",
        "timeout_keep_alive_task",
        "server_state",
        "default_headers",
        "total_requests",
        "h11_max_incomplete_event_size",
        "trailing_data",  # h11's Connection
        "their_state",
        "our_state",
        "next_event",
    }
)
"""Members of uvicorn, h11 and asyncio no public interface offers: used only by :data:`SERVER_INTERNALS`."""


@dataclass(frozen=True)
class Rule:
    """Modules under ``where`` (dotted) never import anything under one of ``never``, except modules in ``unless``."""

    where: str
    never: tuple[str, ...]
    unless: tuple[str, ...] = ()


RULES = (
    Rule("mfumon.exporter", ("mfumon.api", "mfumon.migrations")),
    Rule("mfumon.exporter.node", ("mfumon.exporter.job", "mfumon.exporter.demo", "mfumon.exporter.scheduler")),
    Rule("mfumon.exporter.job", ("mfumon.exporter.node", "mfumon.exporter.demo", "mfumon.exporter.scheduler")),
    Rule("mfumon.exporter.scheduler", ("mfumon.exporter.node", "mfumon.exporter.job", "mfumon.exporter.demo")),
    Rule(
        "mfumon.exporter.ops",
        ("mfumon.exporter.node", "mfumon.exporter.job", "mfumon.exporter.demo", "mfumon.exporter.scheduler"),
    ),
    Rule("mfumon.mfu", ("mfumon.api", "mfumon.exporter", "mfumon.migrations")),
    Rule("mfumon.api", ("mfumon.migrations",), unless=("mfumon.api.db.migrate",)),
    Rule("mfumon.api.routes", ("mfumon.api.crud",)),
    Rule("mfumon.api", INTERNAL_PACKAGES, unless=(SERVER_INTERNALS,)),
    Rule("mfumon.api.server", ("mfumon.api.routes", "mfumon.api.deps")),
)


def _violations(modules: list[Module], rule: Rule) -> list[str]:
    return [
        f"{module.path} imports {imported}"
        for module in modules
        if _under(module.name, rule.where) and module.name not in rule.unless
        for imported in sorted(module.imports)
        if any(_under(imported, bad) for bad in rule.never)
    ]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.where)
def test_imports_run_one_way(rule: Rule) -> None:
    assert not _violations(MODULES, rule)


def test_the_walk_sees_every_part_and_the_rules_bite() -> None:
    """The walk finds each side's modules and the rules catch a planted arrow (guards against a vacuous pass)."""
    names = {m.name for m in MODULES}
    for expected in ("mfumon.api.routes.jobs", "mfumon.exporter.node.agent", "mfumon.migrations.env", "mfumon.mfu"):
        assert expected in names
    # The names are the ones Python imports the files as (the editable install maps them the same way).
    sample = [
        m for m in MODULES if m.name in ("mfumon.exporter.node.agent", "mfumon.migrations.versions", "mfumon.mfu")
    ]
    assert sorted(str(m.path) for m in sample) == [
        "exporter/node/agent.py",
        "mfumon/mfu/__init__.py",
        "migrations/versions/__init__.py",
    ]
    for module in sample:
        spec = importlib.util.find_spec(module.name)
        assert spec is not None and spec.origin == str(REPO / module.path), module
    planted = [
        Module(Path("exporter/node/x.py"), "mfumon.exporter.node.x", frozenset({"mfumon.api.state.views"})),
        Module(Path("api/routes/x.py"), "mfumon.api.routes.x", frozenset({"mfumon.api.crud.jobs"})),
        Module(Path("api/state/x.py"), "mfumon.api.state.x", frozenset({"mfumon.migrations.change_triggers"})),
        Module(Path("api/db/migrate.py"), "mfumon.api.db.migrate", frozenset({"mfumon.migrations"})),
    ]
    found = [v for rule in RULES for v in _violations(planted, rule)]
    assert found == [
        "exporter/node/x.py imports mfumon.api.state.views",
        "api/state/x.py imports mfumon.migrations.change_triggers",
        "api/routes/x.py imports mfumon.api.crud.jobs",
    ]
    relative = _imports(REPO / "mfumon/mfu/_mfu.py", "mfumon.mfu._mfu")
    assert "mfumon.mfu._flops" in relative


def _internal_members(path: Path) -> set[str]:
    """The :data:`INTERNAL_MEMBERS` the file uses as attributes, or names in ``getattr``/``hasattr`` strings."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in INTERNAL_MEMBERS:
            found.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in INTERNAL_MEMBERS:
            found.add(node.value)
    return found


def test_one_module_touches_the_servers_internals() -> None:
    """Exactly one module under api/ imports h11, uvicorn's protocols or asyncio's transports, or uses a member of
    theirs that is no public interface: the rest of ``mfumon serve`` works through ``mfumon.api.server.interface``.
    Every private member that module relies on is in its ``RELIED_ON``, checked as the server starts."""
    touching = sorted(
        str(module.path)
        for module in MODULES
        if _under(module.name, "mfumon.api")
        and (
            any(_under(imported, bad) for imported in module.imports for bad in INTERNAL_PACKAGES)
            or _internal_members(REPO / module.path)
        )
    )
    assert touching == ["api/server/protocol.py"]
    pytest.importorskip("uvicorn")
    from mfumon.api.server.protocol import RELIED_ON

    relied = {name for _, name in RELIED_ON}
    used_private = {name for name in _internal_members(REPO / "api/server/protocol.py") if name.startswith("_")}
    assert used_private <= relied
    planted = Module(Path("api/server/door.py"), "mfumon.api.server.door", frozenset({"h11", "mfumon.api.deps"}))
    assert [v for rule in RULES for v in _violations([planted], rule)] == [
        "api/server/door.py imports h11",
        "api/server/door.py imports mfumon.api.deps",
    ]


def test_every_package_is_listed_for_the_wheel() -> None:
    """pyproject.toml maps the folders (package-dir); a mapped folder's sub-packages cannot be found, so each is listed
    by name in ``packages``: one missing there would be left out of the wheel (tests/test_packaging.py builds it)."""
    packages = sorted(m.name for m in MODULES if m.path.name == "__init__.py")
    assert "mfumon.api.routes" in packages and "mfumon.migrations.versions" in packages
    assert packages == sorted(_SETUPTOOLS["packages"])
    assert not any((REPO / "mfumon" / name).exists() for name in ("api", "exporter", "migrations"))  # no links


def test_every_aggregator_error_derives_from_one_base() -> None:
    pytest.importorskip("fastapi")
    from mfumon.api.errors import MfumonError

    outside = []
    for module in MODULES:
        if not _under(module.name, "mfumon.api"):
            continue
        loaded = importlib.import_module(module.name)
        for _, cls in inspect.getmembers(loaded, inspect.isclass):
            if cls.__module__ == module.name and issubclass(cls, BaseException) and not issubclass(cls, MfumonError):
                outside.append(f"{module.name}.{cls.__name__}")
    assert not outside


def test_exception_handlers_live_in_one_module() -> None:
    registering = []
    for module in MODULES:
        tree = ast.parse((REPO / module.path).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("exception_handler", "add_exception_handler"):
                registering.append(str(module.path))
    assert sorted(set(registering)) == ["api/handlers.py"]


def test_one_peak_table() -> None:
    """No module outside the peak table (``mfumon/mfu/_peaks.py``) writes a device's dense peak FLOP/s as a number:
    the demo, the benches and the aggregator look peaks up in the table (tests may pin them)."""
    from mfumon.mfu import DEFAULT_DEVICES

    figures = {value for spec in DEFAULT_DEVICES for value in spec.peaks.values() if value}
    copies = []
    for path in sorted([*(REPO / "bench").rglob("*.py"), *(REPO / module.path for module in MODULES)]):
        if path == REPO / "mfumon/mfu/_peaks.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value in figures:
                copies.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value:g}")
    assert len(figures) > 50
    assert not copies
