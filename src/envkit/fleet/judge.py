"""Each node against the profile's lock cell and the GPU layer: the table of ``fleet check``.

Per node: every package the cell locks for it at its locked version (``packages``) with its
files as RECORD lists them (``files``); kernel images for each of its GPUs in the locked vLLM
and torch builds, from envkit's kernel table (``kernels``: ``gpu.published.kerneltable``, a build
the
table lacks is unknown, never a pass or a failure); its driver at or above what the cell's
CUDA build needs (``driver``: ``gpu.needs``, ``gpu.driver.fit``); and across nodes the same
Python and Ray as the others (``python``, ``ray``: the most common answer, the first node's
on a tie). A node that did not answer is ``not answering``, never a pass. Each failed check
names what to do, with the profile, cell and venv.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envkit.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK, BadInput
from envkit.fleet.fingerprint import Files, Fingerprint
from envkit.fleet.lockcell import LockCell
from envkit.gpu.arch import Capability
from envkit.gpu.driver import DriverFit, DriverVersion, fit
from envkit.gpu.needs import for_backend
from envkit.gpu.published import kerneltable
from envkit.gpu.published.kerneltable import KernelTable
from envkit.gpu.published.kernelverdict import Verdict
from envkit.gpu.published.profilefit import releases_said
from envkit.io.escaping import shell_command
from envkit.results import Result, Severity

CHECKS = ("packages", "files", "kernels", "driver", "python", "ray")
SHOWN = 3  # differences named per check


# each severity under the word fleet check shows and its JSON's "status" says
WORD = {Severity.OK: "ok", Severity.ERROR: "differs", Severity.UNKNOWN: "unknown"}


def check(name: str, severity: Severity, detail: str, fix: str = "") -> Result:
    """One of a node's checks: ``name`` (one of CHECKS) its code, ``detail`` its message; the
    node is its subject (:func:`judge` names it). ``unknown``: not decided here (a build the
    kernel table lacks, files unchecked), never a pass or a failure."""
    return Result(code=name, severity=severity, message=detail, fix=fix)


def check_dict(result: Result) -> dict[str, Any]:
    """A node's check: the result, with its fields of schema version 1 (check, status,
    detail) beside it."""
    return {"check": result.code, "status": WORD[result.severity], "detail": result.message,
            **result.to_dict()}  # fmt: skip


@dataclass(frozen=True)
class Answer:
    """What one node gave: its fingerprint, or why there is none."""

    node: str
    fingerprint: Fingerprint | None
    problem: str = ""  # 'did not answer within 120 s', the task's error


@dataclass(frozen=True)
class Context:
    """What every node is judged with: the profile, the venv and the lock cells."""

    profile: str
    venv: Path | None
    cells: dict[str, LockCell]  # node -> its cell
    table: KernelTable = field(default_factory=kerneltable.shipped)

    def rebuild(self, node: str, cell: LockCell, python: str = "") -> str:
        if self.venv is None:
            return (
                f"build the venv from cell {cell.name}'s lock on {node}: "
                + shell_command(
                    [
                        "envkit",
                        "build",
                        self.profile,
                        "--venv",
                        "PATH",
                        *(["--python", python] if python else []),
                    ]
                )
                + ", the same PATH on every node, and check with --venv PATH"
            )
        return f"rebuild {self.venv} on {node} from cell {cell.name}'s lock: " + shell_command(
            [
                "envkit",
                "build",
                self.profile,
                "--venv",
                str(self.venv),
                *(["--python", python] if python else []),
            ]
        )


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    cell: str
    checks: tuple[Result, ...] = ()
    fingerprint: Fingerprint | None = None
    problem: str = ""

    @property
    def answered(self) -> bool:
        return self.fingerprint is not None

    @property
    def differs(self) -> bool:
        return any(c.failed for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "cell": self.cell or None,
            "answered": self.answered,
            "problem": self.problem,
            "ok": self.answered and not self.differs,
            "checks": [check_dict(c) for c in self.checks],
            "fingerprint": self.fingerprint.to_dict() if self.fingerprint else None,
        }


def exit_code(verdicts: Sequence[NodeVerdict]) -> int:
    """1 when any node differs; else 2 when one did not answer (no verdict on it); else 0."""
    if any(v.differs for v in verdicts):
        return EXIT_CHECK_FAILED
    return EXIT_BAD_INPUT if any(not v.answered for v in verdicts) else EXIT_OK


def judge(answers: Sequence[Answer], context: Context) -> list[NodeVerdict]:
    if not answers:
        raise BadInput("No node to check.", "Give fingerprint files, or --ray ADDRESS.")
    prints = [a.fingerprint for a in answers if a.fingerprint is not None]
    python = _reference([p.python for p in prints])
    ray = _reference([p.ray for p in prints])
    out = []
    for answer in answers:
        node, fp = answer.node, answer.fingerprint
        cell = context.cells.get(node)
        if fp is None or cell is None:
            out.append(NodeVerdict(node, cell.name if cell else "", problem=answer.problem))
            continue
        checks = (
            *_packages(node, fp, cell, context),
            _kernels(node, fp, cell, context),
            _driver(node, fp, cell),
            _same("python", node, fp.python, python, context.rebuild(node, cell, python)),
            _same("ray", node, fp.ray, ray, _ray_fix(node, ray, context)),
        )
        out.append(
            NodeVerdict(node, cell.name, tuple(replace(c, subject=node) for c in checks), fp)
        )
    return out


def _reference(values: list[str]) -> str:
    if not values:
        return ""
    counts = Counter(values)
    top = max(counts.values())
    return next(v for v in values if counts[v] == top)


def _packages(
    node: str, fp: Fingerprint, cell: LockCell, context: Context
) -> tuple[Result, Result]:
    wanted = cell.wanted_on(fp)
    wrong: list[str] = []
    modified: list[str] = []
    unchecked = 0
    for name in sorted(wanted):
        dist = next((d for d in fp.distributions if d.name == name), None)
        if dist is None:
            wrong.append(f"{name} missing (locked {wanted[name]})")
        elif dist.version != wanted[name]:
            had = dist.version or "with no version in its metadata"  # a damaged dist-info
            wrong.append(f"{name} {had} (locked {wanted[name]})")
        elif dist.files is Files.MODIFIED:
            modified.append(f"{name} ({', '.join(dist.modified[:2])})")
        elif dist.files is Files.UNCHECKED:
            unchecked += 1
    fix = context.rebuild(node, cell)
    if wrong:
        packages = check(
            "packages", Severity.ERROR, f"{len(wrong)} of {len(wanted)} differ: {_few(wrong)}", fix
        )
    else:
        packages = check("packages", Severity.OK, f"all {len(wanted)} at the locked version")
    if modified:
        files = check(
            "files", Severity.ERROR, f"{len(modified)} changed since install: {_few(modified)}", fix
        )
    elif unchecked and unchecked == len(wanted):
        files = check("files", Severity.UNKNOWN, "not checked (the fingerprint has no hashes)")
    else:
        files = check("files", Severity.OK, "as their RECORD lists them")
    return packages, files


def _few(items: list[str]) -> str:
    more = f", and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def _kernels(node: str, fp: Fingerprint, cell: LockCell, context: Context) -> Result:
    backend = cell.cell.backend
    if for_backend(backend) is None:
        return check("kernels", Severity.OK, f"no CUDA build ({backend or 'any'} cell)")
    if not fp.gpus:
        return check(
            "kernels",
            Severity.ERROR,
            f"no GPU visible ({fp.gpu_problem or 'nvidia-smi lists none'})",
            f"make the GPUs visible on {node} (the NVIDIA driver and nvidia-smi), or leave the "
            f"node out of cell {cell.name} of {context.profile}",
        )
    locked = {p.name: p.version for p in cell.packages}
    table = context.table
    where = fp.platform  # the node's own: an aarch64 node is judged by the aarch64 builds
    if "vllm" in locked and table.publishes_no_wheel(locked["vllm"], where):
        return check(
            "kernels",
            Severity.ERROR,
            f"vLLM {locked['vllm']} publishes no {where} wheel: cell {cell.name} does not "
            f"install on {node}",
            f"give {node} a profile whose vLLM has {where} wheels: envkit new-profile NAME "
            f"--for-model MODEL --platform {where}",
        )
    vllm = table.vllm_build(locked["vllm"], where) if "vllm" in locked else None
    cuda = for_backend(backend)
    torch = (
        table.torch_build(locked["torch"], cuda.cuda if cuda else None, where)
        if "torch" in locked
        else None
    )
    builds = [b for b in (vllm, torch) if b is not None]
    missing = [
        f"{n} {locked[n]}"
        for n, b in (("vllm", vllm), ("torch", torch))
        if n in locked and b is None
    ]
    for gpu in {g.capability: g for g in fp.gpus}.values():
        capability = Capability.parse(gpu.capability, "compute capability")
        for build in builds:
            verdict = build.on(capability)
            if verdict.verdict is Verdict.NO_KERNEL_IMAGE:
                return check(
                    "kernels",
                    Severity.ERROR,
                    f"{gpu.name} ({capability}): {verdict.reason}",
                    f"{node}'s {gpu.name} cannot run cell {cell.name} of {context.profile}: "
                    f"move the node to a fleet with a profile whose builds carry {capability}"
                    f"{releases_said(capability, table)}",
                )
            if verdict.verdict is Verdict.UNKNOWN:
                missing.append(verdict.build)
    if missing or not builds:
        said = ", ".join(missing) or "no vLLM or torch locked"
        return check("kernels", Severity.UNKNOWN, f"{said}: not in envkit's kernel table")
    names = ", ".join(sorted({f"{g.name} ({g.capability})" for g in fp.gpus}))
    return check("kernels", Severity.OK, f"kernel images for {names}")


def _driver(node: str, fp: Fingerprint, cell: LockCell) -> Result:
    need = for_backend(cell.cell.backend)
    if need is None:
        return check("driver", Severity.OK, "no NVIDIA driver needed")
    install = (
        f"install NVIDIA driver {need.linux_driver or 'for CUDA ' + need.cuda} or newer on "
        f"{node}: cell {cell.name} of {cell.cell.profile} is a CUDA {need.cuda} build"
    )
    if not fp.driver:
        return check("driver", Severity.ERROR, "no NVIDIA driver seen", install)
    try:
        found = fit(DriverVersion.parse(fp.driver), need.cuda)
    except BadInput:
        return check("driver", Severity.UNKNOWN, f"driver {fp.driver!r} is not a version")
    if found is DriverFit.FULL:
        return check("driver", Severity.OK, f"{fp.driver} runs CUDA {need.cuda}")
    if found is DriverFit.MINOR_COMPAT:
        return check(
            "driver",
            Severity.OK,
            f"{fp.driver} runs CUDA {need.cuda} through minor-version "
            f"compatibility (every feature needs {need.linux_driver})",
        )
    if found is DriverFit.UNKNOWN:
        return check(
            "driver", Severity.UNKNOWN, f"CUDA {need.cuda} is not in envkit's driver table"
        )
    return check(
        "driver",
        Severity.ERROR,
        f"{fp.driver} is older than CUDA {need.cuda} needs ({need.summary()}; cell {cell.name})",
        install,
    )


def _same(name: str, node: str, value: str, reference: str, fix: str) -> Result:
    shown = value or "none"
    if value == reference:
        return check(name, Severity.OK, shown)
    return check(name, Severity.ERROR, f"{shown}, the others {reference or 'none'}", fix)


def _ray_fix(node: str, ray: str, context: Context) -> str:
    where = str(context.venv) if context.venv else "the Ray workers' environment"
    if not ray:
        return f"uninstall Ray from {where} on {node}, as on the other nodes"
    return f"install ray=={ray} into {where} on {node}, the Ray the other nodes run"
