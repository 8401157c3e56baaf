"""Writing profiles: the scanned ``[models]`` table, and drafts for a model.

tomlkit keeps the comments and layout of a profile people wrote. Every write goes to a
temporary file beside the target and is renamed over it: a profile is never half written.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import Version

from envkit.errors import BadInput
from envkit.gpu.needs import DriverNeed, for_cuda
from envkit.io.atomicfile import write_atomic
from envkit.io.escaping import shell_command, visible
from envkit.io.files import read_small_text
from envkit.models.current import transformers_bounds
from envkit.profiles.bounds import Bound
from envkit.profiles.profile import MAX_PROFILE_BYTES, NAME_RE, Profile, load_profile

if TYPE_CHECKING:  # read for their types only (tomlkit and the solver: where they are used)
    from tomlkit.items import Array, Table

    from envkit.compat.check.checker import Checker
    from envkit.gpu.arch import Capability
    from envkit.models.check_model import ModelConfig
    from envkit.models.solver import Solution
from envkit.releases.registry import Scan, Scanner, parse_target, releases_listing, with_bounds


def _array(items: list[str]) -> Array:
    import tomlkit

    arr = tomlkit.array()
    arr.extend(items)
    if items:
        arr.multiline(True)
    return arr


def models_table(
    vllm: Scan, transformers: Scan, bounds: Mapping[str, Bound] | None = None
) -> Table:
    """The ``[models]`` table for a vLLM + transformers pair: sorted, deterministic."""
    import tomlkit

    table = tomlkit.table()
    table.add(
        tomlkit.comment(
            "Written by `envkit scan --update` from the pinned releases' "
            "wheels; do not edit by hand."
        )
    )
    table.add("vllm", vllm.version)
    table.add("transformers", transformers.version)
    table.add(
        "source",
        f"{vllm.wheel} (model registry, config registry); "
        f"{transformers.wheel} (CONFIG_MAPPING_NAMES)",
    )
    table.add("architectures", _array(sorted(vllm.architectures)))
    table.add("model_types", _array(sorted(set(transformers.model_types) | set(vllm.model_types))))
    table.add("vllm_model_types", _array(sorted(vllm.model_types)))
    previous = tomlkit.inline_table()
    previous.update(dict(sorted(vllm.previously_supported.items())))
    table.add("previously_supported", previous)
    plugins = tomlkit.inline_table()
    plugins.update(dict(sorted(vllm.out_of_tree.items())))
    table.add("out_of_tree", plugins)
    skipped = tomlkit.table()  # vLLM's tests skip these with the pinned transformers
    for arch, bound in sorted((bounds or {}).items()):
        if bound.excludes(transformers.version):
            entry = tomlkit.inline_table()
            entry.update({k: v for k, v in bound.to_dict().items() if v})
            skipped.add(arch, entry)
    table.add("transformers_bounds", skipped)
    return table


def update_models(
    path: Path, vllm: Scan, transformers: Scan, bounds: Mapping[str, Bound] | None = None
) -> None:
    """Rewrite the values of the profile's ``[models]`` table where it stands, keeping its
    comments and everything else as written (a profile without one gets it at the end)."""
    import tomlkit
    from tomlkit.items import Table

    doc = tomlkit.parse(read_small_text(path, MAX_PROFILE_BYTES, what="profile"))
    fresh = models_table(vllm, transformers, bounds)
    existing = doc.get("models")
    if isinstance(existing, Table):
        for key in [k for k in existing if k not in fresh]:
            del existing[key]
        for key, value in fresh.items():
            existing[key] = value  # in place: comments around the key stay
    else:
        if "models" in doc:
            del doc["models"]
        doc.add("models", fresh)
    write_atomic(path, tomlkit.dumps(doc))


def draft(
    name: str, model_type: str, found: Solution, scanner: Scanner, *, checked: bool = True
) -> str:
    """A commented profile from the solver's answer; above ``[torch]``, the driver its torch
    build needs, and (``checked`` False: no driver CUDA was given or found) that the need
    was not checked against any GPU."""
    import tomlkit

    vllm, transformers = found.vllm, found.transformers
    torch_pin = vllm.requires.get("torch", "")
    doc = tomlkit.document()
    # comments carry text from config.json and wheels: visible() keeps each on its line
    # and valid TOML (a comment holds no control character); strings tomlkit escapes itself
    doc.add(
        tomlkit.comment(
            visible(
                f"Drafted by `{shell_command(['envkit', 'new-profile', name])}` for model type "
                f"{model_type} ({found.architecture})."
            )
        )
    )
    doc.add(tomlkit.comment("Review the pins, build it (`envkit build`), then ship it."))
    lines = [
        f"vLLM {vllm.version} for {found.architecture} (model type {model_type}).",
        f"Why transformers {transformers.version}: {found.why_transformers}.",
        *(f"Newer, rejected: {line}." for line in found.rejected),
    ]
    doc.add("description", tomlkit.string("\n".join(lines) + "\n", multiline=True))
    doc.add("python", found.python)
    doc["python"].comment(visible(f"vLLM {vllm.version} requires Python {vllm.requires_python}"))
    doc.add("requirements", _array([f"vllm=={vllm.version}"]))
    constraints = [f"transformers=={transformers.version}"]
    if torch_pin:
        constraints.append(f"torch{torch_pin}")
    doc.add("constraints", _array(constraints))
    cutoff = _cutoff(scanner, vllm, transformers)
    if cutoff:
        doc.add("exclude_newer", cutoff)
        doc["exclude_newer"].comment("a week after the newest pinned release: repeatable")
    torch = tomlkit.table()
    if found.cuda:
        torch.add("backend", "cu" + found.cuda.replace(".", ""))
        torch["backend"].comment(
            visible(f"a CUDA build of torch {found.torch}, from {found.cuda_source}")
        )
        torch.add("cuda", found.cuda)
    above = need_comment(for_cuda(found.cuda), checked=checked) if found.cuda else []
    if above:
        doc.add(tomlkit.nl())
    for line in above:
        doc.add(tomlkit.comment(visible(line)))
    doc.add("torch", torch)
    if above:
        torch.trivia.indent = ""  # the comment sits right on the table's header
    verify = tomlkit.table()
    verify.add("imports", _array(["vllm", "transformers", "torch"]))
    doc.add("verify", verify)
    if found.platform != "linux-x86_64":  # the default matrix is x86_64 alone
        matrix = tomlkit.table()
        matrix.add("platforms", _array([found.platform]))
        matrix["platforms"].comment(visible(f"solved for {found.platform}: its wheels exist"))
        doc.add("matrix", matrix)
    bounds = transformers_bounds(scanner, Version(vllm.version))
    doc.add("models", models_table(vllm, transformers, bounds))
    return tomlkit.dumps(doc)


def need_comment(need: DriverNeed, *, checked: bool) -> list[str]:
    """The comment lines a draft states its driver need with (above ``[torch]``)."""
    lines = [
        f"The driver this build needs: {need.summary()};",
        f'on such a driver, nvidia-smi\'s header says "CUDA Version: {need.cuda}" or higher.',
    ]
    if not checked:
        lines.append(
            "Not checked against a GPU: no --cuda was given and no GPU was found when drafting."
        )
    return lines


def _cutoff(scanner: Scanner, vllm: Scan, transformers: Scan) -> str:
    times = [
        scanner.upload_time("vllm", Version(vllm.version)),
        scanner.upload_time("transformers", Version(transformers.version)),
    ]
    known = [dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in times if t]
    if not known:
        return ""
    day = (max(known) + dt.timedelta(days=7)).date()
    return f"{day.isoformat()}T00:00:00Z"


def refuse_existing(path: Path, *, force: bool) -> None:
    if path.exists() and not force:
        raise BadInput(
            f"{str(path)!r} exists already.", "Choose another name, or pass --force to replace it."
        )


def write_new_profile(path: Path, text: str, *, force: bool) -> None:
    refuse_existing(path, force=force)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)


def rescan(profile: Profile, scanner: Scanner) -> tuple[Scan, Scan]:
    """``scan --update``: scan the profile's pinned vLLM and transformers and rewrite its
    ``[models]`` table from them. BadInput when either is not pinned exactly."""
    vllm_pin, transformers_pin = profile.require_pair()
    vllm = scanner.scan("vllm", vllm_pin)
    transformers = scanner.scan("transformers", transformers_pin)
    bounds = transformers_bounds(scanner, Version(vllm.version))
    update_models(profile.path, vllm, transformers, bounds)
    return with_bounds(vllm, bounds), transformers


def draft_for_model(
    path: Path,
    config: ModelConfig,
    scanner: Scanner,
    checker: Checker,
    *,
    vllm_version: str | None = None,
    python: str | None = None,
    cuda: str | None = None,
    gpu: Capability | None = None,
    force: bool = False,
    platform: str = "linux-x86_64",
) -> tuple[Profile, Solution]:
    """``new-profile``: solve for the newest vLLM + transformers that load the model (within
    ``vllm_version``, ``python``, the driver's ``cuda`` and kernels for ``gpu`` when given)
    and write the profile at ``path``. Returns the profile as read back and the solver's
    answer."""
    from envkit.models.solver import solve

    name = path.stem
    if not NAME_RE.fullmatch(name):
        raise BadInput(f"{name!r} is not a profile name: letters, digits, '.', '_', '+', '-'.")
    refuse_existing(path, force=force)  # before any network
    span = next(
        (each for arch in config.architectures if (each := releases_listing(scanner, arch))),
        None,
    )
    if span is None or not span.listed:
        moved = f" ({span.architecture} now lives in {span.plugin})" if span else ""
        raise BadInput(
            f"No published vLLM release lists {' or '.join(config.architectures) or 'it'}{moved}.",
            "A profile cannot be drafted for a model no vLLM release supports.",
        )
    wanted = None
    if vllm_version:
        _project, wanted = parse_target(f"vllm=={vllm_version}")
        if not (Version(span.first) <= wanted <= Version(span.newest)):
            raise BadInput(
                f"vLLM {wanted} does not list {span.architecture} "
                f"(vLLM {span.first} through {span.newest} do).",
                "Pick a release in that range, or leave out --vllm.",
            )
    from envkit.gpu.published import kerneltable  # drafting alone reads the kernel table

    found = solve(
        span, config.model_type, scanner, checker,
        python=python, cuda=cuda, vllm=wanted, config=config.raw,
        gpu=gpu, table=kerneltable.shipped(), platform=platform,
    )  # fmt: skip
    text = draft(name, config.model_type, found, scanner, checked=cuda is not None)
    write_new_profile(path, text, force=force)
    return load_profile(path), found
