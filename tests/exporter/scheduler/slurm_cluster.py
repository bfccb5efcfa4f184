"""A real one-node Slurm on loopback for the tests: munged, slurmctld and slurmd from Debian's packages.

Everything lives in one temporary directory (config, state, logs, the munge key and socket, and eight character
devices standing in for GPUs: Slurm drops a GPU without ``File=``, and nothing ever opens them). Ports are free
loopback ports, so several test runs can hold their own cluster. Needs root (slurmd runs jobs as the submitting
user, and munged must run as user ``munge``); skipped without the binaries, except in CI, which installs them.
The two Slurm ports are held by :func:`tests.conftest.reserved_port` for the cluster's life (Slurm binds its
listening sockets with SO_REUSEADDR, so it can listen on them while nobody else can take them).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import reserved_port

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel")
GPUS = 8


@dataclass
class SlurmCluster:
    root: Path
    conf: Path
    node: str

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=60, cwd=self.root / "out")
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr}")
        return done.stdout

    def sbatch(self, *args: str) -> str:
        """Submit a batch job; returns its id."""
        return self.run("sbatch", "--parsable", *args).strip().split(";")[0]

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted((self.root / "log").glob("*.log")))


def require_slurm() -> None:
    missing = [b for b in BINARIES if shutil.which(b) is None]
    reason = None
    if missing:
        reason = f"Slurm not installed ({', '.join(missing)} missing; Debian: slurmctld slurmd slurm-client munge)"
    elif os.geteuid() != 0:
        reason = "a real Slurm cluster needs root (munged runs as user munge, slurmd as root)"
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: CI must provide it", pytrace=False)
        pytest.skip(reason)


def _config(root: Path, ctld_port: int, slurmd_port: int, node: str, extra: str) -> str:
    return f"""ClusterName=mfumontest
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={root}/munge-run/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=sched_interval=2
GresTypes=gpu
MailProg=/bin/true
ReturnToService=2
MinJobAge=300
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
NodeName={node} NodeAddr=127.0.0.1 CPUs=64 RealMemory=64000 Gres=gpu:h100:{GPUS} State=UNKNOWN
PartitionName=train Nodes={node} Default=YES MaxTime=INFINITE State=UP
{extra}"""


def _version() -> tuple[int, int]:
    """(major, minor) of the installed slurmd, from ``slurmd -V`` (``slurm-wlm 22.05.8``)."""
    words = subprocess.run(["slurmd", "-V"], capture_output=True, text=True, timeout=30).stdout.split()
    parts = (words[-1] if words else "0.0").split(".")
    return (int(parts[0]), int(parts[1])) if len(parts) > 1 and parts[0].isdigit() else (0, 0)


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def slurm_cluster(
    node: str = "gpu-node-1", timeout_seconds: float = 60.0, extra_config: str = ""
) -> Iterator[SlurmCluster]:
    """Start munged, slurmctld and slurmd; stop them (by their pid files) and remove everything afterwards.

    ``extra_config``: slurm.conf lines after partition ``train`` (more partitions, nodes that never start)."""
    require_slurm()
    root = Path(tempfile.mkdtemp(prefix="mfumon-slurm-"))
    root.chmod(0o755)
    munge = pwd.getpwnam("munge")
    for sub in ("munge-key", "munge-run", "etc", "state", "spool", "log", "dev", "out"):
        (root / sub).mkdir()
    (root / "munge-key").chmod(0o700)
    key = root / "munge-key" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    for path in (root / "munge-key", key, root / "munge-run"):
        os.chown(path, munge.pw_uid, munge.pw_gid)
    for index in range(GPUS):
        os.mknod(root / "dev" / f"nvidia{index}", 0o660 | 0o020000, os.makedev(195, index))
    conf = root / "etc" / "slurm.conf"
    ports = contextlib.ExitStack()
    ctld_port, slurmd_port = ports.enter_context(reserved_port()), ports.enter_context(reserved_port())
    conf.write_text(_config(root, ctld_port, slurmd_port, node, extra_config))
    (root / "etc" / "gres.conf").write_text(
        f"AutoDetect=off\nNodeName={node} Name=gpu Type=h100 File={root}/dev/nvidia[0-{GPUS - 1}]\n"
    )
    if _version() >= (23, 11):  # newer slurmd insists on cgroups unless told not to; 22.05 rejects the option
        (root / "etc" / "cgroup.conf").write_text("CgroupPlugin=disabled\n")
    cluster = SlurmCluster(root=root, conf=conf, node=node)
    pid_files = [root / "slurmd.pid", root / "slurmctld.pid", root / "munge-run" / "munged.pid"]
    try:
        munged = (
            f"--socket={root}/munge-run/munge.socket",
            f"--key-file={key}",
            f"--pid-file={root}/munge-run/munged.pid",
            f"--log-file={root}/munge-run/munged.log",
            f"--seed-file={root}/munge-run/seed",
        )
        _start(["runuser", "-u", "munge", "--", "munged", *munged], root)
        _start(["slurmctld", "-f", str(conf)], root)
        _start(["slurmd", "-N", node, "-f", str(conf)], root)
        deadline = time.monotonic() + timeout_seconds
        while "idle" not in cluster.run("sinfo", "-h", "-o", "%T", check=False):
            if time.monotonic() > deadline:
                raise RuntimeError(f"Slurm did not come up:\n{cluster.log()}")
            time.sleep(0.3)
        yield cluster
    finally:
        cluster.run("scancel", "--full", "-u", "root", check=False) if (root / "slurmctld.pid").exists() else None
        for pid_file in pid_files:
            _stop(_pid(pid_file))
        for pid in _job_processes(root):  # batch scripts our slurmd started and scancel did not reach in time
            with contextlib.suppress(ProcessLookupError, PermissionError):
                group = os.getpgid(pid)
                if group != os.getpgid(0):
                    os.killpg(group, signal.SIGKILL)  # the script and its children (sleep)
        shutil.rmtree(root, ignore_errors=True)
        ports.close()


def _job_processes(root: Path) -> list[int]:
    """Processes whose command line runs from this cluster's directory (its jobs' batch scripts)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if str(root).encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
    return pids


def _start(cmd: Sequence[str], cwd: Path) -> None:
    done = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr}")


def _stop(pid: int | None, timeout_seconds: float = 10.0) -> None:
    """SIGTERM the daemon we started (by its own pid file), SIGKILL if it lingers."""
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
