"""``check-model`` and ``which`` as one flow: the model's config read, each profile's
``[models]`` table made true to its pins, every verdict judged (with the GPU's kernels when
a target is known) and, for a model no profile loads, the vLLM releases that list it.
The command line parses and renders; this assembles."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from envkit.progress import Progress, quiet

if TYPE_CHECKING:
    from envkit.gpu.installed.detect import Choice
    from envkit.models.check_model import ModelReport
    from envkit.profiles.profile import Profile
    from envkit.releases.registry import ReleaseSpan


def check(
    model: str,
    profile: Profile | None,
    shipped: Callable[[], list[Profile]],
    *,
    index: str | None,
    revision: str | None,
    target: Choice,
    progress: Progress = quiet,
) -> ModelReport:
    """The report on ``model`` (a folder, a config.json or a Hub repo id) for ``profile``
    (None: ``which``) against the profiles ``shipped()`` lists (asked once the model is
    read, so a model that cannot be read is said first), ranked. Raises BadInput for a model that
    cannot be read, NetworkError when a release must be scanned and cannot be."""
    from envkit.gpu.published import profilefit
    from envkit.models import check_model
    from envkit.models.current import current_models, lazy_scanner

    config = check_model.load_model_config(model, revision=revision)
    scanner = lazy_scanner(index, progress)
    stale: dict[str, str] = {}

    def current(p: Profile) -> Profile:  # a [models] table true to the profile's pins
        fresh, note = current_models(p, scanner)
        if note:
            stale[p.name] = note
        return fresh

    def listing(arch: str) -> ReleaseSpan | None:  # for a model no profile loads
        from envkit.releases.registry import releases_listing

        return releases_listing(scanner(), arch)

    return check_model.report(
        config,
        current(profile) if profile is not None else None,
        [current(p) for p in shipped()],
        listing,
        stale,
        gpu=profilefit.checker(target.target),
        gpu_source=f"compute capability {target.target}, from {target.source}"
        if target.target is not None
        else "",
    )
