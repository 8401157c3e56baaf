"""What `scan`, `check-model`, `which`, `history`, `compat`, `site` and `new-profile` print."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit.io.escaping import shell_command
from envkit.render.term import (
    columns,
    cut_left,
    echo,
    emit_json,
    human_size,
    one_line,
    table,
    term_width,
    wrap,
)
from envkit.wording import agree, counted

if TYPE_CHECKING:  # the results' types; importing every core module would slow each command
    from envkit.compat.check.checker import CompatReport
    from envkit.gpu.needs import DriverNeed
    from envkit.models.check_model import ModelReport
    from envkit.models.history import History, TypeHistory
    from envkit.models.solver import Solution
    from envkit.profiles.profile import Profile
    from envkit.releases.registry import Scan
    from envkit.results import Result
    from envkit.site.build import SiteResult


def scans(results: Sequence[Scan], as_json: bool, updated: str = "") -> None:
    if as_json:
        data: dict[str, Any] = {"ok": True}
        if len(results) == 1:
            data.update(results[0].to_dict())
        else:
            data["scans"] = [r.to_dict() for r in results]
        if updated:
            data["updated"] = updated
        emit_json(data)
        return
    for scan in results:
        share = scan.bytes_read / scan.wheel_bytes * 100 if scan.wheel_bytes else 0.0
        how = (
            "from the cache"
            if scan.cached
            else (
                f"read {human_size(scan.bytes_read)} of {human_size(scan.wheel_bytes)} "
                f"({share:.2f}%) in {scan.requests} requests, {scan.seconds:.2f} s"
            )
        )
        echo(one_line(f"{scan.project} {scan.version}  ({scan.wheel}, {how})"), bold=True)
        reqs = ", ".join(f"{k}{v}" for k, v in sorted(scan.requires.items()))
        # what the scan keeps of the wheel's requirements: the stack the checks judge
        echo(wrap(f"requires: Python {scan.requires_python or 'any'}; of torch, transformers, "
                  f"tokenizers, torchvision, torchaudio: {reqs or 'none'}", "", "  "))  # fmt: skip
        if scan.project == "vllm":
            echo(f"architectures in the model registry ({len(scan.architectures)}):")
            echo(columns(scan.architectures))
            echo(f"model types with vLLM's own config class ({len(scan.model_types)}):")
            echo(columns(scan.model_types))
            if scan.previously_supported:
                dropped = ", ".join(
                    f"{k} (until {v})" for k, v in sorted(scan.previously_supported.items())
                )
                echo(
                    one_line(f"dropped architectures ({len(scan.previously_supported)}): {dropped}")
                )
        else:
            echo(f"model types AutoConfig knows ({len(scan.model_types)}):")
            echo(columns(scan.model_types))
    if updated:
        echo(f"Updated [models] in {updated}.", fg="green")


def model_report(rep: ModelReport, as_json: bool) -> None:
    if as_json:
        emit_json(rep.to_dict())
        return
    cfg = rep.config
    echo(cut_left(f"model {cfg.source}", term_width()))
    echo(
        one_line(
            f"  model_type {cfg.model_type}; architectures {', '.join(cfg.architectures) or '-'}"
            + ("; ships remote code (auto_map)" if cfg.remote_code else "")
        )
    )
    if rep.gpu:
        echo(one_line(f"  gpu {rep.gpu}"))
    shown = [rep.verdict] if rep.verdict is not None else list(rep.verdicts)
    for verdict in shown:  # its line is its result's message
        said = verdict.result
        echo(one_line(said.message), fg="red" if said.failed else "green", bold=True)
        for problem in verdict.problems:
            echo(wrap(f"{problem.code}: {problem.message}", "  ", "    "))
            if problem.fix:
                echo(wrap(f"fix: {problem.fix}", "    ", "      "))
        for note in verdict.notes:
            echo(wrap(f"note: {note}", "  ", "    "))
    names = ", ".join(rep.supported_by)
    echo(wrap(f"supported by: {names or 'no profile envkit knows of'}", "", "  "))
    if rep.releases is not None and rep.releases.listed:
        rel = rep.releases
        echo(
            wrap(
                f"{rel.architecture} is listed by vLLM {rel.first} through {rel.newest} (newest "
                f"release {rel.latest_release}); draft a profile with: envkit new-profile NAME "
                f"--for-model {cfg.source}",
                "",
                "  ",
            )
        )
    if rep.releases is not None and rep.releases.plugin:
        echo(
            wrap(
                f"{rep.releases.architecture} has moved out of vLLM to a plugin: "
                f"{rep.releases.plugin}",
                "",
                "  ",
            )
        )
    elif rep.lookup:
        echo(wrap(rep.lookup, "", "  "))


def histories(
    model: str | None, found: Sequence[History], as_json: bool, of_type: TypeHistory | None = None
) -> None:
    if as_json:
        typed = (
            {"model_type": of_type.model_type, "serving": list(of_type.architectures),
             "transformers": of_type.transformers or None}
            if of_type else {}
        )  # fmt: skip
        emit_json(
            {
                "ok": any(h.listed for h in found),
                "model": model,
                **typed,
                "architectures": [h.to_dict() for h in found],
            }
        )
        return
    if of_type is not None:
        _type_header(of_type)
    for h in found:
        data = h.to_dict()
        echo(one_line(h.architecture), bold=True, nl=False)
        if data["first"]:
            echo(f": vLLM {data['first']} through {data['newest']}", nl=False)
        else:
            echo(": listed by no published vLLM release", nl=False)
        echo(f" ({counted(len(h.releases), 'release')} read)")
        runs: list[list[Any]] = []  # [first, last, presence, transformers, note]
        for r in h.releases:
            bound = f"vLLM's tests: {r.bound.describe_tier()}" if r.bound else ""
            key = (r.presence.value, r.transformers, "; ".join(n for n in (r.note, bound) if n))
            if runs and tuple(runs[-1][2:]) == key:
                runs[-1][1] = r.version
            else:
                runs.append([r.version, r.version, *key])
        rows = [("RELEASES", "STATE", "TRANSFORMERS", "NOTE")]
        rows += [
            (first if first == last else f"{first} to {last}", state, tf or "-", note)
            for first, last, state, tf, note in runs
        ]
        echo(table(rows))
        if data["gaps"]:
            echo(one_line(f"  gaps: {', '.join(data['gaps'])}"))
        if data["dropped_in"]:
            echo(
                one_line(
                    f"  dropped in: vLLM {data['dropped_in']} (the first release after the "
                    "newest one listing it)"
                )
            )
        if data["plugin"]:
            echo(wrap(f"moved to a plugin: {data['plugin']}", "  ", "    "))
        profiles = ", ".join(h.profiles) or "none"
        echo(f"  shipped profiles that load it: {profiles}")


def _type_header(typed: TypeHistory) -> None:
    tables = f"transformers {typed.transformers}'s auto tables" if typed.transformers else ""
    sources = " and ".join(s for s in (tables, "vLLM's registry names") if s)
    if not typed.architectures:
        echo(wrap(f"model type {typed.model_type}: no architecture serves it (none in {sources})",
                  "", "  "), fg="red")  # fmt: skip
        near = f"did you mean {' or '.join(typed.close)}? " if typed.close else ""
        echo(wrap(f"fix: {near}A model type is config.json's model_type, such as qwen2_vl; "
                  "envkit history ARCH or MODEL takes an architecture or a model's folder.",
                  "  ", "    "))  # fmt: skip
    else:
        archs = ", ".join(typed.architectures)
        echo(wrap(f"model type {typed.model_type}: served by {archs} (from {sources})", "", "  "))
    if typed.note:
        echo(wrap(f"note: {typed.note}", "  ", "    "))
    listed = {h.architecture for h in typed.histories if h.listed}
    if listed and set(typed.architectures) - listed:
        rest = ", ".join(a for a in typed.architectures if a not in listed)
        echo(wrap(f"listed by no published vLLM release: {rest}", "  ", "    "))


def compat(rep: CompatReport, as_json: bool) -> None:
    if as_json:
        emit_json(rep.to_dict())
        return
    pair = f"vLLM {rep.vllm} + transformers {rep.transformers}"
    results = [f.result for f in rep.findings]
    core = [r for r in results if r.failed]  # what breaks vLLM as a whole
    scoped = [r for r in results if not r.failed]
    if core:
        echo(one_line(f"{pair}: not compatible"), fg="red", bold=True)
    else:
        echo(one_line(f"{pair}: compatible"), fg="green", bold=True, nl=False)
        broken = rep.broken_architectures
        echo(f", except for the {len(broken)} named under 'breaks only'" if broken else "")
    if not rep.declared.inside:
        echo(
            wrap(
                f"transformers {rep.transformers} is outside vLLM {rep.vllm}'s declared "
                f"{rep.declared.requirement}: no installer picks it without an override",
                "  ",
                "    ",
            ),
            fg="yellow",
        )
    for r in [*core, *scoped]:
        _compat_finding(r)
    against = (
        f", and the attributes vLLM {rep.vllm} uses against transformers {rep.reference}, "
        "the release it was made against"
        if rep.reference
        else ""
    )
    how = (
        "from the cache"
        if rep.cached
        else (
            f"{human_size(rep.bytes_read)} read of {human_size(rep.wheel_bytes)} "
            f"in {rep.seconds:.1f} s"
        )
    )
    echo(wrap(f"checked {rep.imports_checked} imports{against}; {how}", "  ", "    "))
    if rep.undecided:
        echo(wrap("  not decidable from source: " + ", ".join(rep.undecided), "", "    "))


def _compat_finding(r: Result) -> None:
    """One compat finding, drawn from its result alone (``Incompatibility.result``): what
    ``--json`` carries is what is shown."""
    places = r.fact("places", "1")
    more = int(places) - 1 if places.isdigit() else 0
    where = r.fact("file") + (f" (+{more} more)" if more > 0 else "")
    module = r.fact("module")
    origin = f" from {module}" if module and module != r.subject else ""
    removed = f", removed in {r.fact('removed_in')}" if r.fact("removed_in") else ""
    taken = f", transformers' own since {r.fact('taken_in')}" if r.fact("taken_in") else ""
    echo(wrap(f"{r.code}: {r.subject}{origin}{removed}{taken}", "  ", "    "))
    echo(wrap(f"used at {where}", "    ", "      "))
    if r.fact("detail"):
        echo(wrap(r.fact("detail"), "    ", "      "))
    only = list(r.facts("architectures"))
    if types := r.facts("model_types"):
        only.append(f"{agree(len(types), 'model type', 'model types')} {', '.join(types)}")
    if processors := r.facts("processors"):
        kind = agree(len(processors), "processor", "processors")
        only.append(f"{kind} {', '.join(processors)} (loaded by name, for a checkpoint whose "
                    "processor config names it)")  # fmt: skip
    only.extend(f"a {c} (vLLM tests the checkpoint for it first)" for c in r.facts("conditions"))
    if only:
        echo(wrap("breaks only: " + "; ".join(only), "    ", "      "))


def site(result: SiteResult, architectures: int, releases: int, as_json: bool) -> None:
    if as_json:
        emit_json({"ok": True, "architectures": architectures, "releases": releases,
                   **result.to_dict()})  # fmt: skip
        return
    echo(
        one_line(
            f"Wrote {len(result.files)} files into {result.out}: {architectures} architectures "
            f"x {releases} vLLM releases; the matrix page weighs "
            f"{human_size(result.matrix_bytes)}."
        ),
        fg="green",
    )
    echo(one_line(f"Open {result.out / 'index.html'} in a browser (no server needed)."))


def drafted(
    profile: Profile,
    found: Solution,
    driver: str,
    need: DriverNeed | None,
    locks: Path,
    as_json: bool,
) -> None:
    """``driver``: the CUDA the machine's driver runs ('' when no --cuda and no GPU: the
    draft's ``need`` is then assumed, said as a warning and ``driver_assumed``)."""
    if as_json:
        emit_json(
            {
                "ok": True,
                "profile": profile.to_dict(),
                "locks": str(locks),
                "driver": need.to_dict() if need else None,
                "driver_assumed": not driver,
                "architecture": found.architecture,
                "solution": {
                    "vllm": found.vllm.version,
                    "transformers": found.transformers.version,
                    "python": found.python,
                    "torch": found.torch or None,
                    "cuda": found.cuda or None,
                    "cuda_source": found.cuda_source or None,
                    "driver_cuda": driver or None,
                    "gpu": found.gpu or None,
                    "gpu_note": found.gpu_note,
                    "platform": found.platform,
                    "rejected": list(found.rejected),
                },
            }
        )
        return
    echo(
        one_line(
            f"Wrote {profile.path}: vLLM {profile.models.vllm}, transformers "
            f"{profile.models.transformers}, Python {profile.python}, torch "
            f"{profile.torch.backend or 'default'}."
        ),
        fg="green",
    )
    if found.cuda_source:
        limit = f"; the driver runs CUDA {driver} at most" if driver else ""
        echo(wrap(f"CUDA {found.cuda or '?'} from {found.cuda_source}{limit}", "  ", "    "))
    if need is not None:
        echo(wrap(f"driver: {need.summary()}", "  ", "    "))
    if found.gpu:
        echo(
            wrap(f"gpu: solved for compute capability {found.gpu}: {found.gpu_note}", "  ", "    ")
        )
    elif found.gpu_note:
        echo(
            wrap(
                f"warning: no GPU was named or found, so the draft was not checked against "
                f"one: {found.gpu_note} (draft again with --gpu NAME or --compute-capability "
                "X.Y for the GPU that serves it).",
                "",
                "  ",
            ),
            fg="yellow",
            bold=True,
        )
    if not driver:
        what = (
            f"it takes CUDA {need.cuda}, so the machine that serves it needs {need.summary()}; "
            f"check there that nvidia-smi's header says CUDA Version {need.cuda} or higher"
            if need is not None
            else "it names no CUDA build, so which driver it needs is not known"
        )
        echo(
            wrap(
                f"warning: no --cuda was given and no GPU was found, so the draft was not "
                f"checked against a driver: {what} (or draft again with --cuda X.Y, the "
                "highest CUDA its driver runs).",
                "",
                "  ",
            ),
            fg="yellow",
            bold=True,
        )
    for line in found.rejected:
        echo(wrap(f"rejected {line}", "  ", "    "))
    lock, build = (shell_command(["envkit", verb, profile.name]) for verb in ("lock", "build"))
    echo(
        wrap(
            f"Review it, then, from any folder: {lock} (its locks go to {locks}), {build}",
            "",
            "  ",
        )
    )
