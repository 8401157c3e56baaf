"""``envkit image``'s result: the image, its labels, the checks run inside it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envkit.io.escaping import shell_command
from envkit.render.term import echo, emit_json, wrap

if TYPE_CHECKING:  # the core is loaded by the command that uses it, not by every command
    from envkit.image.make import ImageResult


def to_dict(result: ImageResult) -> dict[str, Any]:
    spec = result.spec
    return {
        "ok": result.ok,
        "profile": spec.profile,
        "cell": spec.cell,
        "base": result.base,
        "lock": {"path": str(spec.lock), "sha256": spec.lock_sha256},
        "versions": {n: spec.version(n) or None for n in ("vllm", "transformers", "torch")},
        "cuda": spec.cuda or None,
        "driver_floor": spec.driver or None,
        "compute_capabilities": [str(c) for c in spec.capabilities] if spec.kernels_known else None,
        "labels": result.labels,
        "context": str(result.context) if result.context is not None else None,
        "build_command": list(result.build_command),
        "builder": result.builder or None,
        "isolation": result.isolation or None,
        "isolation_note": result.isolation_note or None,
        "built": bool(result.image_id) or result.removed,
        "image_id": result.image_id or None,
        "digest": result.digest or None,
        "tag": result.tag or None,
        "saved": result.saved or None,
        "removed": result.removed,
        "verification": result.report.to_dict() if result.report is not None else None,
    }


def image(result: ImageResult, as_json: bool) -> None:
    if as_json:
        emit_json(to_dict(result))
        return
    spec = result.spec
    echo(wrap(f"profile {spec.profile}  cell {spec.cell}  base {result.base}", "", "  "))
    echo(wrap(f"lock {spec.lock} (sha256:{spec.lock_sha256})", "", "  "))
    kernels = spec.capabilities_text(", ")
    echo(
        wrap(
            f"carries vLLM {spec.version('vllm') or '-'}, transformers "
            f"{spec.version('transformers') or '-'}, torch {spec.version('torch') or '-'}; "
            f"CUDA {spec.cuda or 'none'}, driver {spec.driver or 'any'} or newer; kernels for "
            f"compute capabilities {kernels}",
            "",
            "  ",
        )
    )
    if result.isolation_note:
        echo(wrap(f"note: {result.isolation_note}", "", "      "), dim=True)
    if result.context is not None:
        echo(wrap(f"context {result.context} (Containerfile and the locked files)", "", "  "))
    if result.report is not None:
        from envkit.render.env import report_lines  # every command imports this module

        report_lines(result.report)
    if not result.image_id and not result.removed:
        echo(wrap("build it with: " + shell_command(list(result.build_command)), "", "  "))
        return
    if result.removed:
        echo(
            wrap(
                "The image failed envkit's checks inside it and was removed; nothing was tagged.",
                "",
                "  ",
            ),
            fg="red",
            bold=True,
        )
        return
    echo(f"image {result.image_id}", fg="green", bold=True)
    if result.digest:
        echo(f"digest {result.digest}")
    if result.tag:
        echo(f"tagged {result.tag}")
    if result.saved:
        echo(f"saved {result.saved}")
