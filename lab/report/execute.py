"""Executing the notebooks: Papermill, each notebook in its own process, locally or on a Dask cluster.

Each notebook runs in its own process (Papermill's working-directory handling is not thread-safe) with the
parameters ``profile`` and ``result_path``; the notebook saves its results Dataset there.

- locally (the default): a process pool of ``jobs`` processes, the cores split between them
  (:func:`kernel_environment`);
- on a Dask cluster (``scheduler="tls://host:8786"``): one task per notebook, Papermill in the worker, which sends
  back the executed notebook and the results NetCDF as bytes (no shared file system); the client writes them.

:func:`connect` makes the Dask client of both ``lab report`` and ``lab sweep``: one that does not answer is a one-line
:class:`lab.checks.ConfigError`; :func:`tls_security` builds Dask's TLS settings from the CA, certificate and key
files (Dask ships pickled code to its workers: a scheduler's port must never be open without TLS).
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from lab import registry
from lab.io import atomic_write_bytes

__all__ = ["KERNEL_NAME", "KERNEL_SETTINGS", "SCHEDULER_TIMEOUT_S", "THREAD_VARIABLES", "connect", "dask_runs",
           "kernel_environment", "local_runs", "tls_security"]

KERNEL_NAME = "python3"

#: seconds to wait for a Dask scheduler to answer before giving up (``scheduler=`` / ``--scheduler``)
SCHEDULER_TIMEOUT_S = 10.0

#: environment of every notebook's kernel besides its threads: Panel inlines its CSS (no cdn.holoviz.org)
KERNEL_SETTINGS = {"PANEL_INLINE": "true", "LAB_EXPLORE": "0"}  # a report run shows the Explore cells as a note

#: thread-count variables of the numerical libraries a notebook's kernel uses (BLAS, OpenMP, Numba)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def kernel_environment(jobs: int) -> dict[str, str]:
    """The thread settings for one of ``jobs`` notebooks running at once: the cores split between them, and
    OpenMP threads that sleep rather than spin when idle. Without this, two notebooks each start a thread per core
    and spinning BLAS threads starve each other (DAM's quick notebook took 572 s beside another, 39 s alone)."""
    per_job = max(1, (os.cpu_count() or 1) // max(1, jobs))
    env = {name: str(per_job) for name in THREAD_VARIABLES}
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def _execute(slug: str, notebook: str, out_dir: str, profile: str, env: dict[str, str] | None = None
             ) -> tuple[float, str | None]:
    """Run one notebook (in a worker process, its kernel inheriting ``env``); returns (seconds, error or None)."""
    return _run_papermill(slug, registry.NOTEBOOK_DIR / notebook, Path(out_dir), profile, env or {})


def _execute_remote(slug: str, notebook: str, source: bytes, profile: str) -> dict:
    """One notebook in a Dask worker: ``source`` (the client's notebook file) runs in a temporary folder of the
    worker; returns ``{"seconds", "error", "ipynb", "nc"}`` with the executed notebook and the results NetCDF as
    bytes (None where missing), so the client needs no file system shared with the worker."""
    try:  # split the worker's cores between the notebooks it runs at once
        from distributed import get_worker

        jobs = get_worker().state.nthreads
    except Exception:
        jobs = 1
    with tempfile.TemporaryDirectory(prefix=f"lab-report-{slug}-") as tmp:
        folder = Path(tmp)
        src = folder / "in" / notebook
        src.parent.mkdir()
        src.write_bytes(source)
        out = folder / "out"
        out.mkdir()
        seconds, error = _run_papermill(slug, src, out, profile, kernel_environment(jobs))
        ipynb, nc = out / notebook, out / f"{slug}.nc"
        return {
            "seconds": seconds,
            "error": error,
            "ipynb": ipynb.read_bytes() if ipynb.exists() else None,
            "nc": nc.read_bytes() if nc.exists() else None,
        }


def _kernel_manager():
    """The kernel manager class of the notebook runs: its kernel talks over local IPC sockets (in Jupyter's runtime
    folder), not TCP, so ipykernel has no unencrypted TCP to warn about on every run; TCP where IPC is missing
    (Windows)."""
    from jupyter_client import AsyncKernelManager
    from traitlets import default

    if os.name == "nt":
        return AsyncKernelManager

    class IpcKernelManager(AsyncKernelManager):
        @default("transport")
        def _ipc(self) -> str:
            return "ipc"

        @default("ip")
        def _ipc_path(self) -> str:
            # a folder of its own per kernel: two kernels started at once in one folder picked the same socket
            # names (ports are numbered from 1 by whichever file is missing) and read each other's messages
            import tempfile

            return os.path.join(tempfile.mkdtemp(prefix="lab-kernel-"), "ipc")

    return IpcKernelManager


def _run_papermill(slug: str, src: Path, out: Path, profile: str, env: dict[str, str]) -> tuple[float, str | None]:
    """Papermill on ``src`` into ``out`` (the executed notebook and ``<slug>.nc``), the kernel inheriting ``env``;
    returns (seconds, error or None). The notebook runs in ``notebooks/`` where this machine has one."""
    import papermill as pm

    os.environ.update({**KERNEL_SETTINGS, **env})
    cwd = registry.NOTEBOOK_DIR if registry.NOTEBOOK_DIR.is_dir() else src.parent
    start = time.perf_counter()
    try:
        pm.execute_notebook(str(src), str(out / src.name),
                            parameters={"profile": profile, "result_path": str(out / f"{slug}.nc")},
                            kernel_name=KERNEL_NAME, cwd=str(cwd), progress_bar=False, log_output=False,
                            kernel_manager_class=_kernel_manager())
        error = None
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, pm.PapermillExecutionError):
            error += "\n" + traceback.format_exc(limit=3)
    return time.perf_counter() - start, error


def tls_security(tls_ca_file: str | None = None, tls_cert: str | None = None, tls_key: str | None = None, *,
                 names: tuple[str, str, str] = ("tls_ca_file", "tls_cert", "tls_key")):
    """Dask's ``Security`` for a TLS scheduler (``tls://``): the CA that signed the cluster's certificates, this
    client's certificate and its key (None when the certificate file holds the key), encryption required. None when
    no file is given. ConfigError, naming the option (``names``), for a file that is missing or does not load."""
    from lab.checks import bad_value

    given = dict(zip(names, (tls_ca_file, tls_cert, tls_key)))
    if all(v is None for v in given.values()):
        return None
    for name, value in given.items():
        if value is None and name != names[2]:
            raise bad_value(name, None, f"a PEM file: TLS needs {names[0]} and {names[1]} (and {names[2]} unless "
                                        f"the certificate file holds its key)")
        if value is not None and not Path(value).is_file():
            raise bad_value(name, str(value), "an existing PEM file")
    from distributed.security import Security

    security = Security(tls_ca_file=tls_ca_file, tls_client_cert=tls_cert, tls_client_key=tls_key,
                        require_encryption=True)
    try:
        security.get_connection_args("client")  # reads the files: a bad one fails here, not at the scheduler
    except (OSError, ValueError) as exc:
        raise bad_value(names[1], str(tls_cert), f"a PEM certificate and key that load with {names[0]} "
                                                 f"({type(exc).__name__}: {' '.join(str(exc).split())})") from None
    return security


def connect(scheduler: str, security=None):
    """A ``dask.distributed.Client`` of the scheduler at ``scheduler`` (with ``security``, a ``tls://`` address:
    :func:`tls_security`); ConfigError (naming ``scheduler``, one line) when none answers within
    :data:`SCHEDULER_TIMEOUT_S` seconds or the connection is refused."""
    from dask.distributed import Client

    from lab.checks import bad_value

    tls = security is not None or (isinstance(scheduler, str) and scheduler.startswith("tls://"))
    example = "tls://host:8786" if tls else "tcp://host:8786"
    if not isinstance(scheduler, str) or not scheduler.strip():
        raise bad_value("scheduler", scheduler, f"the address of a running Dask scheduler, e.g. {example}")
    if security is not None and not scheduler.startswith("tls://"):
        raise bad_value("scheduler", scheduler, f"a tls:// address, e.g. {example} (TLS certificates were given)")
    try:
        _probe(scheduler, security)  # a Client that fails to start leaves a half-made object behind
        return Client(scheduler, timeout=SCHEDULER_TIMEOUT_S, set_as_default=False, security=security)
    except Exception as exc:  # noqa: BLE001 - refused, timed out, a TLS handshake that failed: one line
        hint = "; a tls:// scheduler needs the CA file, certificate and key" if tls and security is None else ""
        raise bad_value(
            "scheduler", scheduler,
            f"the address of a running Dask scheduler that accepts this client, e.g. {example} (connecting failed "
            f"within {SCHEDULER_TIMEOUT_S:g} s: {type(exc).__name__}: {' '.join(str(exc).split())}{hint})",
        ) from None


def _probe(scheduler: str, security) -> None:
    """Open and close one connection to ``scheduler`` (in a thread with an event loop of its own, so that it works
    where a loop already runs, as in a notebook); raise what the connection raised."""
    import asyncio
    import threading

    from distributed.comm import connect as comm_connect
    from distributed.security import Security

    args = (security or Security()).get_connection_args("client")
    failed: list[BaseException] = []

    async def probe() -> None:
        comm = await comm_connect(scheduler, timeout=SCHEDULER_TIMEOUT_S, **args)
        await comm.close()

    def run() -> None:
        try:
            asyncio.run(probe())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            failed.append(exc)

    thread = threading.Thread(target=run, name="lab-scheduler-probe", daemon=True)
    thread.start()
    thread.join(SCHEDULER_TIMEOUT_S + 5)
    if failed:
        raise failed[0]
    if thread.is_alive():
        raise TimeoutError(f"no answer from {scheduler}")


def local_runs(todo, out_dir: Path, profile: str, jobs: int):
    """Yield (method, seconds, error) as the local process pool finishes the notebooks of ``todo``."""
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {
            pool.submit(_execute, m.slug, m.notebook, str(out_dir), profile, kernel_environment(jobs)): m
            for m in todo
        }
        for fut in as_completed(futures):
            try:
                seconds, error = fut.result()
            except Exception as exc:  # a crashed worker
                seconds, error = 0.0, f"{type(exc).__name__}: {exc}"
            yield futures[fut], seconds, error


def dask_runs(todo, out_dir: Path, profile: str, client, retries: int = 1):
    """Yield (method, seconds, error) as the cluster's workers finish the notebooks of ``todo``; the executed
    notebook and its NetCDF come back as bytes and are written here."""
    from dask.distributed import as_completed as dask_completed

    for m in [m for m in todo if not m.notebook_path.is_file()]:
        yield m, 0.0, f"FileNotFoundError: no notebook {m.notebook_path}"
    futures = {
        client.submit(_execute_remote, m.slug, m.notebook, m.notebook_path.read_bytes(), profile,
                      pure=False, retries=retries, key=f"lab-report-{m.slug}-{os.urandom(4).hex()}"): m
        for m in todo if m.notebook_path.is_file()
    }
    for fut in dask_completed(futures, loop=client.loop):
        m = futures[fut]
        if fut.status == "error":
            exc = fut.exception()
            yield m, 0.0, f"{type(exc).__name__} in a Dask worker: {exc}"
            continue
        got = fut.result()
        for name, data in ((m.notebook, got["ipynb"]), (f"{m.slug}.nc", got["nc"])):
            path = out_dir / name
            if data is None:
                path.unlink(missing_ok=True)  # never leave an older run's file where this run wrote none
            else:
                atomic_write_bytes(path, data)
        yield m, got["seconds"], got["error"]
