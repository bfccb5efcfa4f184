"""`JobReporter`: record each training step in memory, report throughput to the aggregator in the background.

The training loop only ever calls `JobReporter.step`, which takes a lock for a few additions and returns; a
daemon thread cuts an interval every ``interval_seconds`` and posts it to ``POST /v1/jobs/{id}/reports``
together with the job's static metadata. Nothing the network does can raise into, or block, the training loop.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit

from mfumon.exporter.job import fingerprint
from mfumon.exporter.job.models import ModelSpec, describe_model
from mfumon.exporter.job.profile import ProfileAgent, ProfileRequest
from mfumon.exporter.job.reporter import _env
from mfumon.exporter.job.reporter._client import Delivery, DeliveryStats
from mfumon.exporter.job.reporter._phases import StepPhases, for_module
from mfumon.exporter.job.reporter._window import StepWindow
from mfumon.exporter.links import job_page_url
from mfumon.mfu import DTYPES

logger = logging.getLogger("mfumon.exporter.job.reporter")

_AUTO = "auto"
_BETWEEN_STEPS = ("checkpoint_save", "checkpoint_load", "eval")  # events whose time is not input wait
_KINDS = ("training", "inference")
_DTYPES = DTYPES  # the engine's one list of dtypes with dense peaks
EVENT_TYPES = ("init", "checkpoint_save", "checkpoint_load", "eval", "restart", "failure")


class _NullWindow:
    """What a non-reporting rank records into: nothing."""

    last_mean_step_seconds = None

    def add(self, *args: Any, **kwargs: Any) -> None:
        return None

    def add_rate(self, *args: Any, **kwargs: Any) -> None:
        return None

    def take(self, stall_after_seconds: float | None = None) -> None:
        return None


class JobReporter:
    """Reports a job's throughput to the mfumon aggregator; only rank 0 reports unless told otherwise.

    Example::

        with JobReporter(model="config.json", seq_len=4096, gpu_model="auto") as reporter:
            for batch in loader:
                train_step(batch)
                reporter.step(tokens=global_batch_size * 4096)

    Args:
        job_id: defaults to ``MFUMON_JOB_ID``, ``SLURM_JOB_ID``, ``TORCHELASTIC_RUN_ID``, ... else generated.
        url: aggregator URL; defaults to ``MFUMON_URL``, else ``http://127.0.0.1:8000``.
        token: ingest token; defaults to the first line of ``token_file``, else ``MFUMON_TOKEN``.
        kind: ``"training"`` or ``"inference"``.
        model: a `ModelSpec`, a dict of its fields, a HF config (dict, path, PretrainedConfig) or a module.
        seq_len: sequence length for the attention term of the FLOPs formula.
        num_gpus: devices of the whole job; defaults to ``WORLD_SIZE``.
        gpu_model: ``"auto"`` reads ``torch.cuda.get_device_name()`` if torch is loaded and sees a GPU.
        interval_seconds: how often the background thread reports.
        rank: this process's rank (default from ``RANK``/``LOCAL_RANK``/...); only rank 0 reports.
        all_ranks: report from every rank (each then needs its own ``job_id``).
        start: start the background thread now (else on the first `flush` or `start`).
        step_timing: when ``model`` is a torch module, time each step's input wait (and, for a DDP/FSDP-wrapped
            module, its exposed gradient sync) from hooks on it; see `watch`.
        profile: act on profiles asked of the job (``mfumon profile JOB_ID``): run ``torch.profiler`` for the asked
            steps on the asked ranks and send a summary; every rank's reporter takes part, reporting or not.
        profile_dir: where profile traces are kept (default ``MFUMON_PROFILE_DIR``, else a temporary directory).
        tags: the user's own labels for the software fingerprint (``{"experiment": "lr-sweep"}``), sent once with
            the fingerprint the reporter collects (Python, PyTorch, CUDA, cuDNN, NCCL, driver, frameworks, image).
        software_from: ``"imported"`` (what this process runs: the default) or ``"installed"`` (what is installed
            beside it: ``mfumon wrap``, whose training runs in a child process).
    """

    def __init__(
        self,
        job_id: str | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        kind: str = "training",
        model: Any = None,
        seq_len: int | None = None,
        num_gpus: int | None = None,
        gpu_model: str | None = _AUTO,
        dtype: str | None = None,
        peak_flops_per_gpu: float | None = None,
        recompute_activations: bool | None = None,
        name: str | None = None,
        team: str | None = None,
        pool: str | None = None,
        gpus_requested: int | None = None,
        interval_seconds: float = 15.0,
        timeout_seconds: float = 5.0,
        max_pending_reports: int = 64,
        rank: int | None = None,
        all_ranks: bool = False,
        start: bool = True,
        step_timing: bool = True,
        profile: bool = True,
        profile_dir: str | os.PathLike[str] | None = None,
        tags: Mapping[str, str] | None = None,
        software_from: str = "imported",
    ) -> None:
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
        if dtype is not None and dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {_DTYPES}, got {dtype!r}")
        if interval_seconds <= 0:
            raise ValueError("interval_seconds must be > 0")
        self.rank = _env.default_rank() if rank is None else rank
        self.job_id = _env.sanitize_job_id(job_id) if job_id else _env.default_job_id()
        self.kind = kind
        self.interval_seconds = float(interval_seconds)
        self.url = (url or _env.default_url()).rstrip("/")
        self.active = bool(all_ranks or self.rank == 0)
        if self.active and urlsplit(self.url).scheme not in ("http", "https"):
            logger.error("mfumon reporter disabled: %r is not an http(s) URL", self.url)
            self.active = False
        self.model: ModelSpec | None = None
        self.metadata: dict[str, Any] = {}
        self.last_report: dict[str, Any] | None = None
        self._window: StepWindow | _NullWindow = StepWindow() if self.active else _NullWindow()
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._closed = False
        self._pid = os.getpid()
        self._flush_lock = threading.Lock()
        self._delivery: Delivery | None = None
        self._init_pending = False  # the first step() sends the ``init`` event
        self._pre_step_event_seconds = 0.0
        self._phases: StepPhases | None = None
        self._comm_source: str | None = None  # framework_timers once a trainer's timers gave comm_seconds
        self._profiler: ProfileAgent | None = None
        self._peer_delivery: Delivery | None = None
        if profile and not self.active and urlsplit(self.url).scheme in ("http", "https"):
            world_size = num_gpus if num_gpus is not None else _env.default_world_size()
            self._start_peer_profiler(token or _env.read_token(token_file), timeout_seconds, profile_dir, world_size)
        if not self.active:
            return
        if model is not None:
            self.model = describe_model(model, seq_len=seq_len)
            if step_timing and _is_torch_module(model):
                self.watch(model)
        self.metadata = _metadata(
            kind=kind,
            num_gpus=num_gpus if num_gpus is not None else _env.default_world_size(),
            gpu_model=_env.detect_gpu_model() if gpu_model == _AUTO else gpu_model,
            dtype=dtype,
            model=self.model,
            peak_flops_per_gpu=peak_flops_per_gpu,
            recompute_activations=recompute_activations,
            name=name,
            team=team,
            pool=pool,
            gpus_requested=gpus_requested,
        )
        secret = token or _env.read_token(token_file)
        self._delivery = Delivery(self.url, secret, timeout_seconds=timeout_seconds, max_pending=max_pending_reports)
        self._job_path = f"/v1/jobs/{quote(self.job_id, safe='')}"
        # The software fingerprint goes once, with the job's registration: every probe guarded, nothing imported.
        probes = fingerprint.IMPORTED if software_from == "imported" else fingerprint.INSTALLED
        self.software = fingerprint.collect(_tag_pairs(tags), probes=probes)
        self._delivery.enqueue("PUT", self._job_path, {**self.metadata, "software": self.software})
        if profile:
            delivery, path = self._delivery, f"{self._job_path}/profiles"
            self._profiler = ProfileAgent(
                job_id=self.job_id,
                rank=self.rank,
                world_size=self.metadata.get("num_gpus"),
                send=lambda body: delivery.enqueue("POST", path, body),
                trace_dir=profile_dir,
            )
        self._started_at = _env.process_start_time() or time.time()
        self._init_pending = True
        # Once, from the reporting rank: which id the job reports as and where its page is (W&B's "View run at").
        # WARNING, because that is what Python shows with no logging set up (the last-resort handler prints the bare
        # message on stderr) and what `mfumon wrap` shows by default; `wrap -q` or mfumon's logger at ERROR hides it.
        logger.warning("mfumon: reporting job %s, view it at %s", self.job_id, self.page_url)
        if _env.restart_count() > 0:  # Slurm requeued the job, or torchrun restarted its workers
            self.event("restart")
        atexit.register(self._close_at_exit)
        if start:
            self.start()

    # -- the hot path ---------------------------------------------------------------------------------------

    def step(
        self,
        tokens: int,
        step_seconds: float | None = None,
        comm_seconds: float | None = None,
        data_wait_seconds: float | None = None,
    ) -> None:
        """Record one finished step: ``tokens`` processed by the *whole job* (global batch x sequence length).

        The optional times are this step's wall time, its exposed (not overlapped) communication and its wait
        for input data; a watched module (`watch`) supplies those not given. Without ``step_seconds`` the first
        call only starts the clock.
        """
        if self._phases is not None:
            times = self._phases.step_ended()
            step_seconds = times.step_seconds if step_seconds is None else step_seconds
            comm_seconds = times.comm_seconds if comm_seconds is None else comm_seconds
            data_wait_seconds = times.data_wait_seconds if data_wait_seconds is None else data_wait_seconds
        self._window.add(tokens, step_seconds, comm_seconds, data_wait_seconds)
        if self._init_pending:
            self._send_init()
        if self._profiler is not None:
            self._profiler.on_step()

    def watch(self, module: Any) -> None:
        """Time the steps of the loop that trains ``module`` from hooks on it, without timing code in the loop.

        Each `step` then carries the step's input wait (from the end of the previous step to this step's first
        training forward; device idle time on a GPU) and, when ``module`` is wrapped in DDP or FSDP, the gradient
        sync that backward did not hide. Evaluation forwards between steps are not counted as waiting.
        Does nothing on a rank that does not report, or when already watching.
        """
        if self.active and self._phases is None and not self._closed:
            self._phases = for_module(module)

    def record_throughput(
        self,
        tokens_per_second: float,
        *,
        step_seconds: float | None = None,
        comm_seconds: float | None = None,
        data_wait_seconds: float | None = None,
        source: str = "",
        step: int | None = None,
    ) -> None:
        """Record a whole-job throughput measured elsewhere (e.g. a log line); for `mfumon wrap`.

        Observations from one ``source`` in an interval are averaged; different sources (e.g. several
        inference engines of one job) are added up.
        """
        if comm_seconds is not None:
            self._comm_source = "framework_timers"
        self._window.add_rate(tokens_per_second, step_seconds, source, step, comm_seconds, data_wait_seconds)
        if self._init_pending:
            self._send_init()

    def record_times(
        self,
        *,
        step_seconds: float | None = None,
        comm_seconds: float | None = None,
        data_wait_seconds: float | None = None,
    ) -> None:
        """Record per-step times measured elsewhere without a throughput (a trainer's timers table)."""
        if comm_seconds is not None:
            self._comm_source = "framework_timers"
        self._window.add_rate(None, step_seconds, comm_seconds=comm_seconds, data_wait_seconds=data_wait_seconds)

    def update(self, **fields: Any) -> None:
        """Change static metadata (``kind``, ``model``, ``num_gpus``, ...) from the next report on.

        ``None`` removes a field; ``model`` accepts what the constructor does. Sends ``PUT /v1/jobs/{id}``.
        """
        if self._delivery is None:
            return
        metadata = dict(self.metadata)
        for key, value in fields.items():
            if key == "model" and value is not None:
                self.model = describe_model(value)
                value = self.model.to_dict()
            if value is None:
                metadata.pop(key, None)
            else:
                metadata[key] = value
        self.metadata = metadata  # one reference swap: the reporting thread sees the old or the new dict
        self._delivery.enqueue("PUT", self._job_path, dict(metadata))

    # -- job events -----------------------------------------------------------------------------------------

    def event(
        self, type: str, *, seconds: float | None = None, step: int | None = None, exit_code: int | None = None
    ) -> None:
        """Tell the aggregator how the job's time goes: ``checkpoint_save``, ``checkpoint_load``, ``eval``, ...

        ``seconds`` is how long it blocked training. Sent in order with the reports; never raises, never blocks.
        ``init`` (start-up until the first step), ``restart`` (a requeued or restarted job) and ``failure`` (a
        non-zero exit) are sent by the reporter itself.
        """
        if self._delivery is None:
            return
        if type not in EVENT_TYPES:
            logger.warning("mfumon reporter: unknown event type %r ignored (known: %s)", type, ", ".join(EVENT_TYPES))
            return
        if self._phases is not None and type in _BETWEEN_STEPS:
            self._phases.interrupt()  # the loop spent the time since the last step on this, not waiting for data
        body: dict[str, Any] = {"type": type, "timestamp": time.time()}
        if seconds is not None:
            body["seconds"] = max(0.0, float(seconds))
            if self._init_pending:  # before the first step: not part of start-up as ``init`` reports it
                self._pre_step_event_seconds += body["seconds"]
        if step is not None:
            body["step"] = int(step)
        if exit_code is not None:
            body["exit_code"] = int(exit_code)
        self._delivery.enqueue("POST", f"{self._job_path}/events", body)

    @contextlib.contextmanager
    def timed(self, type: str, *, step: int | None = None) -> Iterator[None]:
        """``with reporter.timed("checkpoint_save", step=n): save(...)`` sends the event with its duration."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.event(type, seconds=time.perf_counter() - started, step=step)

    def _send_init(self) -> None:
        self._init_pending = False
        startup = time.time() - self._started_at - self._pre_step_event_seconds
        self.event("init", seconds=max(0.0, startup))

    # -- lifecycle ------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the background reporting thread (idempotent)."""
        if not self.active or self._closed or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="mfumon-reporter", daemon=True)
        self._thread.start()

    def flush(self, timeout_seconds: float | None = None) -> bool:
        """Cut the current interval now and try to send everything queued; True when nothing is left."""
        if self._delivery is None:
            return True
        with self._flush_lock:
            self._queue_interval()
            delivered = self._delivery.deliver(timeout_seconds)
        if self._profiler is not None and self._delivery.last_response is not None:
            self._profiler.offer(ProfileRequest.from_json(self._delivery.last_response.get("profile_request")))
        return delivered

    def close(self, exit_code: int | None = None, timeout_seconds: float = 10.0) -> None:
        """Report the last partial interval, end the job (``POST .../end``) and stop the thread.

        A non-zero ``exit_code`` is also sent as a ``failure`` event. Called by the context manager and at
        interpreter exit; later calls do nothing. Gives up after ``timeout_seconds`` so that a dead aggregator
        never holds the job's exit.
        """
        if self._closed or os.getpid() != self._pid:  # a forked child does not own the job
            return
        self._closed = True
        atexit.unregister(self._close_at_exit)
        if self._phases is not None:
            self._phases.close()
        if self._profiler is not None:
            self._profiler.wait(timeout_seconds / 4)  # a profile being summarised still gets sent
        if self._peer_delivery is not None:
            self._wake.set()  # stops the store poll
            self._peer_delivery.deliver(timeout_seconds / 4)
        if self._delivery is None:
            return
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_seconds / 2)
        with self._flush_lock:
            self._queue_interval(final=True)
            if exit_code not in (None, 0):
                self.event("failure", exit_code=exit_code)
            body = None if exit_code is None else {"exit_code": int(exit_code)}
            self._delivery.enqueue("POST", f"{self._job_path}/end", body)
            if not self._delivery.deliver(timeout_seconds / 2):
                logger.warning("mfumon reporter closed with %d request(s) unsent", self.stats().pending)

    def _close_at_exit(self) -> None:
        """At interpreter exit: an uncaught exception (the interpreter keeps it in ``sys.last_value``) is a failure."""
        self.close(exit_code=1 if getattr(sys, "last_value", None) is not None else None)

    def __enter__(self) -> JobReporter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        code = 0
        if isinstance(exc, SystemExit):
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        elif exc is not None:
            code = 1
        self.close(exit_code=code)

    # -- introspection --------------------------------------------------------------------------------------

    @property
    def last_response(self) -> dict[str, Any] | None:
        """The aggregator's answer to the last report delivered (``mfu``, ``flops_per_token``, ...)."""
        return None if self._delivery is None else self._delivery.last_response

    @property
    def page_url(self) -> str:
        """The job's page on the aggregator (``<url>/ui/jobs/<job_id>``)."""
        return job_page_url(self.url, self.job_id)

    @property
    def profiler(self) -> ProfileAgent | None:
        """This rank's profile agent, or None (``profile=False``, or no http(s) URL): shows whether and as which
        rank this process takes part in profiles, a rank that does not report included."""
        return self._profiler

    def stats(self) -> DeliveryStats:
        """Requests sent, pending, dropped (queue full) and rejected (4xx) so far."""
        if self._delivery is None:
            return DeliveryStats(0, 0, 0, 0, 0)
        return self._delivery.stats()

    # -- background -----------------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._wake.wait(self.interval_seconds):
            try:
                self.flush()
            except Exception:  # never let the reporter thread die silently on a bug
                logger.exception("mfumon reporter: unexpected error while reporting")

    def _queue_interval(self, final: bool = False) -> None:
        stall_after = None if final else self._stall_after_seconds()
        fields = self._window.take(stall_after)
        if fields is None or self._delivery is None:
            return
        report = {**self.metadata, **fields}
        if self._profiler is not None and (profiled := self._profiler.take_profiled_steps()):
            report["profiled_steps"] = profiled
        if self._comm_source is not None and "comm_seconds" in fields:
            report["comm_source"] = self._comm_source
        self.last_report = report
        self._delivery.enqueue("POST", f"{self._job_path}/reports", report)

    def _start_peer_profiler(
        self,
        secret: str | None,
        timeout_seconds: float,
        profile_dir: str | os.PathLike[str] | None,
        world_size: int | None,
    ) -> None:
        """A rank that does not report still profiles when asked: it reads the request rank 0 passed on through the
        process-group store (polled every interval) and posts its own summary."""
        self._peer_delivery = Delivery(self.url, secret, timeout_seconds=timeout_seconds, max_pending=4)
        delivery, path = self._peer_delivery, f"/v1/jobs/{quote(self.job_id, safe='')}/profiles"

        def send(body: dict[str, Any]) -> None:
            delivery.enqueue("POST", path, body)
            delivery.deliver(timeout_seconds * 2)

        self._profiler = ProfileAgent(
            job_id=self.job_id, rank=self.rank, world_size=world_size, send=send, trace_dir=profile_dir
        )
        agent = self._profiler

        def poll() -> None:
            while not self._wake.wait(self.interval_seconds):
                agent.poll()

        threading.Thread(target=poll, name="mfumon-profile-poll", daemon=True).start()

    def _stall_after_seconds(self) -> float:
        """No step for this long means the job is stuck, not slow: four report intervals or four steps."""
        step = self._window.last_mean_step_seconds or 0.0
        return 4 * max(self.interval_seconds, step)


def _tag_pairs(tags: Mapping[str, str] | None) -> list[tuple[str, str]]:
    """The user's tags, each checked as ``--tag`` checks it; a bad one is logged and left out, never raised."""
    pairs = []
    for key, value in (tags or {}).items():
        try:
            pairs.append(fingerprint.parse_tag(f"{key}={value}"))
        except ValueError as exc:
            logger.warning("mfumon: %s; it is not sent", exc)
    return pairs


def _metadata(**fields: Any) -> dict[str, Any]:
    """The static part of every report, known fields only (``None`` is never sent)."""
    model = fields.pop("model")
    body = {k: v for k, v in fields.items() if v is not None}
    if model is not None:
        body["model"] = model.to_dict()
    return body


def _is_torch_module(model: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)
