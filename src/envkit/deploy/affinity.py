"""Where a pod may land, from the GPU layer: node affinity on the labels NVIDIA's GPU feature
discovery sets on every GPU node.

- ``nvidia.com/gpu.compute.major`` / ``.minor``: the GPU's compute capability, restricted
  to those whose kernels both pinned builds (vLLM's and torch's) carry (the kernel table);
- ``nvidia.com/cuda.driver.major`` / ``.minor`` / ``.rev``: the NVIDIA driver's version
  (550.54.14 is 550 / 54 / 14), at or above the floor the cell's CUDA build needs;
- ``nvidia.com/gpu.memory``: each GPU's memory in MiB, at least the card the plan sized
  for (less 3 %: a card's nominal size and what the driver reports differ a little).

Node selector terms are ORed and the expressions of one term ANDed, and ``Gt`` compares whole
numbers, so "driver >= 550.54.14" is three terms (major above 550; 550 with minor above 54;
550.54 with rev above 13), each repeated for every major of the allowed capabilities.
"""

from __future__ import annotations

from typing import Any

from envkit.gpu.arch import Capability

COMPUTE_MAJOR = "nvidia.com/gpu.compute.major"
COMPUTE_MINOR = "nvidia.com/gpu.compute.minor"
DRIVER_MAJOR = "nvidia.com/cuda.driver.major"
DRIVER_MINOR = "nvidia.com/cuda.driver.minor"
DRIVER_REV = "nvidia.com/cuda.driver.rev"
GPU_MEMORY = "nvidia.com/gpu.memory"  # MiB
MEMORY_SLACK = 0.97
MIB = 1024**2

Expr = dict[str, Any]


def _expr(key: str, op: str, *values: int) -> Expr:
    return {"key": key, "operator": op, "values": [str(v) for v in values]}


def driver_alternatives(driver: str) -> list[list[Expr]]:
    """The ORed alternatives of "driver at or above ``driver``" (``[[]]``: any driver)."""
    parts = [int(p) for p in driver.split(".") if p.isdigit()] if driver else []
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()  # 400.1.0 is 400.1: a node whose driver has no revision label meets it
    if not parts:
        return [[]]
    out: list[list[Expr]] = []
    keys = (DRIVER_MAJOR, DRIVER_MINOR, DRIVER_REV)
    for depth in range(len(parts)):
        same = [_expr(keys[i], "In", parts[i]) for i in range(depth)]
        bound = parts[depth] - (1 if depth == len(parts) - 1 else 0)
        # above the floor's part at this depth; at the last part, the floor itself too
        out.append([*same, _expr(keys[depth], "Gt", bound)])
    return _dedupe(out)


def _dedupe(terms: list[list[Expr]]) -> list[list[Expr]]:
    seen: list[list[Expr]] = []
    for term in terms:
        if term not in seen:
            seen.append(term)
    return seen


def capability_alternatives(capabilities: tuple[Capability, ...] | None) -> list[list[Expr]]:
    """One alternative per major: ``major In [M]`` and ``minor In [...]``; ``[[]]`` when
    nothing is known (no restriction is claimed)."""
    if capabilities is None:
        return [[]]
    majors: dict[int, list[int]] = {}
    for cap in capabilities:
        majors.setdefault(cap.major, []).append(cap.minor)
    return [
        [_expr(COMPUTE_MAJOR, "In", major), _expr(COMPUTE_MINOR, "In", *sorted(set(minors)))]
        for major, minors in sorted(majors.items())
    ]


def node_selector_terms(
    capabilities: tuple[Capability, ...] | None, driver: str, gpu_memory: int = 0
) -> list[dict[str, list[Expr]]]:
    """The terms of ``requiredDuringSchedulingIgnoredDuringExecution`` ([] when nothing
    restricts: a CPU build with unknown kernels)."""
    memory = (
        [_expr(GPU_MEMORY, "Gt", int(gpu_memory / MIB * MEMORY_SLACK) - 1)] if gpu_memory else []
    )
    terms = [
        {"matchExpressions": [*cap, *drv, *memory]}
        for cap in capability_alternatives(capabilities)
        for drv in driver_alternatives(driver)
    ]
    return [t for t in terms if t["matchExpressions"]]


def affinity(
    capabilities: tuple[Capability, ...] | None, driver: str, gpu_memory: int = 0
) -> dict[str, Any]:
    """The pod's ``affinity`` ({} when nothing restricts)."""
    terms = node_selector_terms(capabilities, driver, gpu_memory)
    if not terms:
        return {}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }
