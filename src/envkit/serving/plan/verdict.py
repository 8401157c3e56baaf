"""The plan's verdict as one :class:`~envkit.results.Result`: ``plan-fits`` (the settings as
asked hold the context), ``plan-does-not-fit`` (its fix the recommended ``vllm serve``
command, else the problems' own fixes when no setting fits) or ``plan-model-does-not-load``
(the profile cannot load the model: no memory setting fixes it). ``envkit plan`` prints its
message as the verdict line and carries it as ``result`` in ``--json``.

>>> from envkit.serving.command import Recommendation
>>> rec = Recommendation(gpu_memory_utilization=0.86, max_model_len=4096, dtype="half")
>>> plan_result([], [], "m", utilization=0.86, length=4096, held=13040, recommended=rec,
...             command="vllm serve m").message
'It fits as asked: a 4096-token context at utilisation 0.86 (the KV cache holds 13040 tokens).'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from envkit.results import Result, Severity, failed_codes, fixes

if TYPE_CHECKING:
    from envkit.serving.command import Recommendation


def plan_result(
    problems: Sequence[Result],
    load_problems: Sequence[Result],
    model: str,
    *,
    utilization: float,
    length: int,
    held: int,
    recommended: Recommendation,
    command: str,
) -> Result:
    """The verdict on ``problems`` (the plan's, ``load_problems`` first: why the profile
    cannot load the model, which alone decide when one fails), at ``utilization`` and a
    ``length``-token context as asked (``held`` tokens fit then), beside the ``recommended``
    settings and their ``command`` ('' when none)."""
    unloadable = [p for p in load_problems if p.failed]
    failing = unloadable or [p for p in problems if p.failed]
    codes = failed_codes(failing)
    if unloadable:
        return Result(
            code="plan-model-does-not-load",
            severity=Severity.ERROR,
            subject=model,
            message=f"No command: the profile cannot load this model ({codes}).",
            evidence={"problems": codes},
            fix=fixes(failing),
        )
    facts = {
        "utilization": f"{utilization:.2f}",
        "max_model_len": str(length),
        "max_model_len_that_fits_asked": str(held),
        "recommended_utilization": f"{recommended.gpu_memory_utilization:.2f}",
        "recommended_max_model_len": str(recommended.max_model_len),
    }
    if not failing:
        return Result(
            code="plan-fits",
            severity=Severity.OK,
            subject=model,
            message=f"It fits as asked: a {length}-token context at utilisation "
            f"{utilization:.2f} (the KV cache holds {held} tokens).",
            evidence=facts,
        )
    facts["problems"] = codes
    if command:
        message = (
            f"It does not fit as asked ({codes}); the recommended settings fit: utilisation "
            f"{facts['recommended_utilization']}, a {recommended.max_model_len}-token context."
        )
    else:
        message = f"It does not fit as asked ({codes}), and no setting fits this GPU."
    return Result(
        code="plan-does-not-fit",
        severity=Severity.ERROR,
        subject=model,
        message=message,
        evidence=facts,
        fix=command or fixes(failing),
    )
