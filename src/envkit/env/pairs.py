"""The installed vLLM + transformers pair, decided once for verify and doctor: ``compat``,
``known-bad-pair``, ``requirement-violated`` or ``pair-not-checked``. Every fix names the
value to take: the transformers a profile pins for that vLLM (and the profile), else the
command that drafts one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from envkit.env.checks import CompatLookup
from envkit.env.facts import Installed
from envkit.io.escaping import shell_command
from envkit.profiles.profile import Profile
from envkit.results import Result, Severity


def pin_fix(vllm: str, transformers: str, profiles: Sequence[Profile]) -> str:
    """What to install instead of ``transformers`` under ``vllm``: the pin of the first
    profile that pins this vLLM and another transformers (``profiles`` in the order the
    catalog finds them), else the command that drafts such a profile."""
    compat = shell_command(["envkit", "compat", f"vllm=={vllm}", f"transformers=={transformers}"])
    lists = f"{compat} lists what breaks"
    for profile in profiles:
        pins = profile.expected_versions()
        pin = pins.get("transformers", "")
        if pins.get("vllm") == vllm and pin and pin != transformers:
            return (
                f"pin transformers=={pin}, as profile {profile.name} does: "
                f"{shell_command(['uv', 'pip', 'install', f'transformers=={pin}'])}, or "
                f"{shell_command(['envkit', 'build', profile.name])} ({lists})"
            )
    own = next((p for p in profiles if p.expected_versions().get("vllm") == vllm), None)
    if own is not None:
        return (
            f"{own.name} itself pins this pair: pin another transformers in {own.path} "
            f"(envkit new-profile NAME --vllm {vllm} --for-model MODEL solves one; {lists})"
        )
    return (
        f"no profile pins vLLM {vllm}: draft one, which solves for a transformers that "
        f"passes compat: envkit new-profile NAME --vllm {vllm} --for-model MODEL ({lists})"
    )


def pair_name(vllm: str, transformers: str) -> str:
    return f"vllm {vllm} + transformers {transformers}"


def known_bad(
    dists: Mapping[str, Sequence[Installed]],
    compat: CompatLookup | None = None,
    profiles: Sequence[Profile] = (),
) -> list[Result]:
    """The installed vLLM + transformers pair, as verify and doctor both say it (the one
    place this is decided): a transformers vLLM's own metadata excludes
    (``requirement-violated``), or the pair against `envkit compat`'s findings: ``compat``
    (it holds; ``ok``), ``known-bad-pair`` (the names and attributes this vLLM uses that
    this transformers lacks) or ``pair-not-checked`` (the wheels could not be read:
    ``unknown``, no verdict). Without ``compat``, or when the wheels cannot be read, the
    rule of thumb adds its verdict: a vLLM whose requirement is ``transformers>=4.x`` with
    no upper bound predates transformers 5 (vLLM 0.8 to 0.10) and breaks on it.
    ``profiles`` (the catalog's) give the fixes their pin.
    """
    vllm, transformers = dists.get("vllm", ()), dists.get("transformers", ())
    if not vllm or not transformers:
        return []
    violated = _requirement_findings(vllm, transformers, profiles)
    if violated or compat is None:
        return violated or _predates_5(vllm, transformers, profiles)
    name = pair_name(vllm[0].version, transformers[0].version)
    found = compat(vllm[0].version, transformers[0].version)
    if isinstance(found, str):  # no verdict from the wheels: said so, and the rule's
        return [
            Result(
                severity=Severity.UNKNOWN, code="pair-not-checked", subject=name,
                message=found, evidence={"expected": "compatible", "found": "not checked"},
            ),
            *_predates_5(vllm, transformers, profiles),
        ]  # fmt: skip
    if found.compatible:
        scoped = found.broken_architectures
        return [
            Result(
                severity=Severity.OK, code="compat", subject=name,
                message=f"cannot load: {', '.join(scoped)}" if scoped else "",
                evidence={"expected": "compatible", "found": "compatible"},
            )
        ]  # fmt: skip
    return [
        Result(
            severity=Severity.ERROR,
            code="known-bad-pair",
            subject=name,
            message=f"vllm {found.vllm} + transformers {found.transformers} is not compatible: "
            f"{found.summary()}",
            evidence={"expected": "compatible", "found": "not compatible"},
            fix=pin_fix(str(found.vllm), str(found.transformers), profiles),
        )
    ]


def _pair(
    vllm: Sequence[Installed], transformers: Sequence[Installed]
) -> tuple[Version, SpecifierSet] | None:
    """The installed transformers and the range vLLM's metadata declares for it."""
    try:
        have = Version(transformers[0].version)
    except InvalidVersion:
        return None
    for line in vllm[0].requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower() == "transformers" and not (req.marker and "extra" in str(req.marker)):
            return have, req.specifier
    return None


def _requirement_findings(
    vllm: Sequence[Installed], transformers: Sequence[Installed], profiles: Sequence[Profile]
) -> list[Result]:
    """The installed transformers outside the range vLLM's metadata declares."""
    pair = _pair(vllm, transformers)
    if pair is None or pair[0] in pair[1]:
        return []
    have, spec = pair
    fix = pin_fix(vllm[0].version, str(have), profiles)
    return [
        Result(
            severity=Severity.ERROR,
            code="requirement-violated",
            subject=pair_name(vllm[0].version, str(have)),
            evidence={"expected": f"transformers{spec}", "found": str(have)},
            message=f"vllm {vllm[0].version} requires transformers{spec}; {have} is installed",
            fix=fix if fix.startswith("pin ") else f"install a transformers that fits: {spec}",
        )
    ]


def _predates_5(
    vllm: Sequence[Installed], transformers: Sequence[Installed], profiles: Sequence[Profile]
) -> list[Result]:
    """The rule without the wheels: an uncapped vLLM from before transformers 5, on 5.x."""
    pair = _pair(vllm, transformers)
    if pair is None:
        return []
    have, spec = pair
    uncapped = not any(s.operator in ("<", "<=", "==", "~=") for s in spec)
    predates = all(Version(s.version).major < 5 for s in spec if s.operator in (">=", ">"))
    if not (have.major >= 5 and uncapped and predates):
        return []
    fix = pin_fix(vllm[0].version, str(have), profiles)
    return [
        Result(
            severity=Severity.ERROR,
            code="known-bad-pair",
            subject=pair_name(vllm[0].version, str(have)),
            evidence={"expected": "transformers<5 (this vLLM predates 5)", "found": str(have)},
            message=(
                f"vllm {vllm[0].version} requires transformers{spec}; {have} is installed: "
                "this vLLM predates transformers 5 and breaks on it (tokenizers lost "
                "all_special_tokens_extended)"
            ),
            fix=fix if fix.startswith("pin ") else f"pin transformers<5 ({fix})",
        )
    ]
