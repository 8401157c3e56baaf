"""``envkit export``'s result: the files written and what each carries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envkit.render.term import echo, emit_json, wrap

if TYPE_CHECKING:  # the core is loaded by the command that uses it, not by every command
    from envkit.deploy.export import ExportResult


def to_dict(result: ExportResult) -> dict[str, Any]:
    facts = result.facts
    spec = facts.spec
    return {
        "ok": True,
        "engine": result.engine.value,
        "profile": spec.profile,
        "cell": spec.cell,
        "lock": {"path": str(spec.lock), "sha256": spec.lock_sha256},
        "versions": {n: spec.version(n) or None for n in ("vllm", "transformers", "torch")},
        "image": facts.image.reference if facts.image is not None else None,
        "model": facts.model,
        "serve_args": facts.serve_args(),
        "cuda": spec.cuda or None,
        "driver_floor": spec.driver or None,
        "compute_capabilities": [str(c) for c in spec.capabilities] if spec.kernels_known else None,
        "verdicts": dict(facts.verdicts),
        "kubernetes_version": result.kubernetes_version or None,
        "files": [{"path": str(w.path), "kinds": list(w.kinds)} for w in result.files],
    }


def exported(result: ExportResult, as_json: bool) -> None:
    if as_json:
        emit_json(to_dict(result))
        return
    facts, spec = result.facts, result.facts.spec
    echo(
        wrap(f"profile {spec.profile}  cell {spec.cell}  lock sha256:{spec.lock_sha256}", "", "  ")
    )
    image = facts.image.reference if facts.image is not None else "none (the lock cell itself)"
    echo(wrap(f"image {image}", "", "  "))
    echo(
        wrap(
            f"runs on compute capabilities {spec.capabilities_text(', ')}; driver "
            f"{spec.driver or 'any'} or newer",
            "",
            "  ",
        )
    )
    for key, value in facts.verdicts:
        echo(wrap(f"{key}: {value}", "", "  "))
    for file in result.files:
        echo(wrap(f"wrote {file.path} ({', '.join(file.kinds)})", "", "  "), fg="green")
