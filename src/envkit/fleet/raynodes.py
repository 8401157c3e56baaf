"""Fingerprints from every alive node of a Ray cluster: one task per node, pinned to it.

Ray is an optional extra (``pip install 'envkit[ray]'``), imported here only, when
``--ray`` is used. Each task is scheduled with ``NodeAffinitySchedulingStrategy(soft=False)``
so it runs on that node or not at all, asks for no CPU (a busy node still answers), and
runs :func:`envkit.fleet.gather.fingerprint` in the workers' environment (or of ``--venv``
there); envkit must be importable by the workers. The driver waits at most ``timeout``
seconds for all of them together: a node whose task has not ended by then, or ended with
an error, is an :class:`Answer` without a fingerprint, said as such, never a pass. A
fingerprint that crosses back is validated like a file's (:func:`fingerprint.from_dict`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from envkit.errors import BadInput, NetworkError
from envkit.fleet import fingerprint as fp
from envkit.fleet.judge import Answer

GCS_WAIT = "RAY_gcs_server_port_wait_time_s"  # attempts to reach the GCS, about 1 s each
INSTALL = "pip install 'envkit[ray]' (or uv pip install 'ray>=2.9')"


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise BadInput(
            "--ray needs Ray, which is not installed beside envkit: envkit gathers the "
            "fingerprints with one Ray task per node, so it imports Ray to reach the cluster.",
            f"Install the extra: {INSTALL}; or run `envkit fingerprint --json > FILE` on each "
            "node (srun, kubectl exec, ssh) and pass the files to `envkit fleet check`.",
        ) from None
    return ray


def _remote_fingerprint(venv: str | None, hashes: bool) -> dict[str, Any]:
    """What each task runs on its node (module-level, so the workers import it)."""
    from envkit.fleet.gather import fingerprint

    return fingerprint(Path(venv) if venv else None, hashes=hashes).to_dict()


def gather(address: str, venv: Path | None, *, timeout: float, hashes: bool = True) -> list[Answer]:
    """One answer per alive node of the cluster at ``address``, in the cluster's order."""
    if address.strip().lower() == "local":
        raise BadInput(
            "--ray local would start a new, empty Ray cluster here, not ask a running one.",
            "Give the address of the running cluster (`ray status` on its head node), or "
            "`auto` for the one started on this machine.",
        )
    ray = _ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    try:
        with _bounded_gcs_wait():
            ray.init(
                address=address,
                logging_level=logging.WARNING,
                log_to_driver=False,  # the workers' output never mixes into envkit's
                configure_logging=False,
                ignore_reinit_error=True,
            )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise NetworkError(
            f"Cannot reach the Ray cluster at {address}: {str(exc).splitlines()[0][:300]}.",
            "Check the address (ray status on the head node prints it; `auto` finds a local "
            "cluster) and that this machine reaches the head node's GCS port.",
            kind="unreachable",
        ) from None
    try:
        return _ask(ray, NodeAffinitySchedulingStrategy, venv, timeout, hashes)
    finally:
        ray.shutdown()


@contextlib.contextmanager
def _bounded_gcs_wait() -> Iterator[None]:
    """One attempt to reach the GCS (Ray's own default retries for minutes), unless the
    user set Ray's budget (``RAY_gcs_server_port_wait_time_s``) themselves."""
    if GCS_WAIT in os.environ:
        yield
        return
    os.environ[GCS_WAIT] = "1"
    try:
        yield
    finally:
        os.environ.pop(GCS_WAIT, None)


def _ask(ray: Any, strategy: Any, venv: Path | None, timeout: float, hashes: bool) -> list[Answer]:
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    names = _names(nodes)
    task = ray.remote(num_cpus=0, max_retries=0)(_remote_fingerprint)
    refs = [
        task.options(scheduling_strategy=strategy(n["NodeID"], soft=False)).remote(
            str(venv) if venv else None, hashes
        )
        for n in nodes
    ]
    ready, _late = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    done = set(ready)
    answers = []
    for name, ref in zip(names, refs, strict=True):
        if ref not in done:
            ray.cancel(ref, force=True)
            answers.append(Answer(name, None, f"did not answer within {timeout:.0f} s"))
            continue
        try:
            data = ray.get(ref, timeout=10)
        except ray.exceptions.RayError as exc:  # the task's own failure, as Ray wraps it
            answers.append(Answer(name, None, f"its task failed: {_last_line(exc)}"))
            continue
        try:
            answers.append(Answer(name, fp.from_dict(data)))
        except ValueError as exc:
            answers.append(Answer(name, None, f"answered no fingerprint: {exc}"))
    return answers


def _names(nodes: list[dict[str, Any]]) -> list[str]:
    """Each node's name (``NodeName``, its IP by default), with its id's start when two
    nodes share one (several nodes on one machine)."""
    base = [str(n.get("NodeName") or n.get("NodeManagerAddress") or "node") for n in nodes]
    counts = Counter(base)
    return [
        b if counts[b] == 1 else f"{b}/{str(n.get('NodeID', ''))[:8]}"
        for b, n in zip(base, nodes, strict=True)
    ]


def _last_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    said = text[-1] if text else type(cause).__name__
    return " ".join(said.split())[:400] or type(cause).__name__
