"""compat_runtime.py's judgement: `envkit compat`'s answer for a pair against what the pair
did at start-up, and the Markdown summary.

- vLLM as a whole: compat's verdict (``ok``) against the start-up steps every model needs
  (import, the config package, the tokenizer loader on both tokenizer folders, the config
  loader on the plain llama and qwen2 configs);
- each architecture: compat's findings scoped to it against its own steps (its config
  loaded, when the harness writes one, and its class imported through the registry),
  compared only where vLLM itself imports.

A config-level finding (config-conflict: a field of a config of that model type) is compared
only where the harness loads a config of the architecture's model type, and one that holds
only for some checkpoints (config_key, config_values) only when that config is one of them:
an architecture flagged by nothing else is left out. An architecture that needs a GPU to
import (triton kernels compiled at import time, vLLM's CUDA extensions, cuda-python), one
that needs a package vLLM does not install (timm, librosa, terratorch) and one that fails
with every transformers measured for its vLLM are not compat's business: they are left out
of the comparison and counted under ``skipped``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compat_runtime_configs import CONFIGS, VLLM_WIDE_CONFIGS, model_type_of
from compat_runtime_steps import Step

START_UP = ("import-vllm", "config-package", "tokenizer:qwen2-bpe", "tokenizer:wordlevel")
VLLM_WIDE = (*START_UP, *(f"config:{t}" for t in VLLM_WIDE_CONFIGS))
# vLLM's CUDA extensions, triton kernels and cuda-python wanting a driver or a GPU build
_NEEDS_GPU = re.compile(
    r"active drivers|libcuda|\bCUDA\b|\bcuda\.bindings|'_C' object has no attribute|no GPU", re.I
)
_NOT_REGISTERED = "is not in this vLLM's registry"
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    file: str
    line: int
    architectures: tuple[str, ...] = ()
    model_types: tuple[str, ...] = ()  # compat's scope is these architectures and model types
    # a config-conflict holds only for a checkpoint whose RoPE dict gives config_key one of
    # config_values (compat's Incompatibility.applies_to)
    config_key: str = ""
    config_values: tuple[str, ...] = ()
    # processors a config names and checkpoint formats: the harness loads neither, so such a
    # finding is not vLLM-wide and is compared for no architecture
    processors: tuple[str, ...] = ()
    conditions: tuple[str, ...] = ()

    def said(self) -> str:
        return f"{self.code} {self.name} ({self.file}:{self.line})"

    @property
    def everywhere(self) -> bool:
        return not (self.architectures or self.model_types or self.processors or self.conditions)

    def testable(self, arch: str) -> bool:
        """A config-level finding shows only when vLLM loads a config of the architecture's
        model type: the harness writes one, or the class import is all it sees."""
        return self.code != "config-conflict" or model_type_of(arch) is not None

    def applies_to(self, arch: str) -> bool:
        """Scoped to the architecture, and (when it depends on the checkpoint) true of the
        config the harness loads for it: a class import cannot show a checkpoint's field."""
        model_type = model_type_of(arch)
        if arch not in self.architectures and (
            not model_type or model_type not in self.model_types
        ):
            return False
        if not self.config_key or not model_type:
            return True  # (without a config the finding is not testable: see testable)
        config = CONFIGS[model_type][1]
        return any(
            isinstance(rope, dict) and rope.get(self.config_key) in self.config_values
            for part in (config, config.get("text_config"))
            if isinstance(part, dict)
            for rope in (part.get("rope_scaling"), part.get("rope_parameters"))
        )


@dataclass(frozen=True)
class Compat:
    exit_code: int | None  # None: killed at its deadline
    ok: bool | None  # None: no verdict (a crash, bad input, an index not reached)
    findings: tuple[Finding, ...] = ()
    facts: dict[str, Any] = field(default_factory=dict)  # reference, declared range, ...
    error: str = ""
    seconds: float = 0.0

    def vllm_wide(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.everywhere)

    def scoped(self, arch: str) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.applies_to(arch))


@dataclass(frozen=True)
class Disagreement:
    scope: str  # "vLLM" or the architecture
    # "missed" (compat: fine; it fails), "false-alarm" (compat: breaks; it runs) or
    # "other-cause" (both: it fails, but none of compat's findings is what failed)
    kind: str
    runtime: str  # the failing step: Type: message (where in vLLM)
    compat: str  # compat's findings for the scope, or "no finding"


@dataclass(frozen=True)
class Comparison:
    runtime_ok: bool | None  # None: not measured (the harness's own fixtures failed)
    failed_step: str  # the first vLLM-wide step that failed
    verdict: str  # agree, agree-other-cause, missed, false-alarm, no-compat-verdict, not-measured
    archs_compared: int = 0
    archs_agree: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # why -> architectures
    disagreements: tuple[Disagreement, ...] = ()
    unseen: tuple[str, ...] = ()  # vLLM-wide findings no failing step shows


def _by_name(steps: Iterable[Step]) -> dict[str, Step]:
    return {s.name: s for s in steps}


def _names(finding: Finding, step: Step) -> bool:
    """The failing step is this finding: the exception names it (or, for a missing module,
    a package of it), or vLLM failed at the very place compat named."""
    text = f"{step.message} {step.cause}"
    if finding.name in text:
        return True
    quoted = re.findall(r"'([\w.]+)'", text)
    if any(q.startswith("transformers.") and finding.name.startswith(q + ".") for q in quoted):
        return True
    return f"{finding.file}:{finding.line}" in (step.origin, step.raised_in)


def _explains(findings: Iterable[Finding], failed: Iterable[Step]) -> bool:
    return any(_names(f, s) for s in failed for f in findings)


def unseen(steps: Iterable[Step], compat: Compat) -> tuple[str, ...]:
    """compat's vLLM-wide findings that no failing step of the pair shows (the code path
    may not be one the harness runs, or the finding cannot fail)."""
    failed = [s for s in steps if not s.ok]
    return tuple(f.said() for f in compat.vllm_wide() if not any(_names(f, s) for s in failed))


def vllm_verdict(steps: Mapping[str, Step], compat: Compat) -> tuple[bool | None, str, str]:
    """(runtime ok, first failed step, verdict) for vLLM as a whole."""
    if "tokenizer-fixtures" in steps and not steps["tokenizer-fixtures"].ok:
        return None, "tokenizer-fixtures", "not-measured"
    failed = [steps.get(n) or Step(n, "not-run") for n in VLLM_WIDE]
    failed = [s for s in failed if not s.ok]
    runtime_ok = not failed
    first = failed[0].name if failed else ""
    if compat.ok is None:
        return runtime_ok, first, "no-compat-verdict"
    if compat.ok and runtime_ok:
        return True, "", "agree"
    if compat.ok:
        return False, first, "missed"
    if runtime_ok:
        return True, "", "false-alarm"
    verdict = "agree" if _explains(compat.vllm_wide(), failed) else "agree-other-cause"
    return False, first, verdict


def arch_outcome(steps: Mapping[str, Step], arch: str) -> Step | str:
    """The architecture's failing step (or its class step when all passed), or why it is
    not compared."""
    cls = steps.get(f"class:{arch}")
    if cls is None or cls.status == "not-run":
        return "not run"
    if not cls.ok and _NOT_REGISTERED in cls.message:
        return "not in this vLLM's registry"
    model_type = model_type_of(arch)
    config_wide_ok = all(steps.get(f"config:{t}", Step(t, "not-run")).ok for t in VLLM_WIDE_CONFIGS)
    if model_type and config_wide_ok:
        config = steps.get(f"config:{model_type}")
        if config is not None and not config.ok:
            return config
    if not cls.ok and _NEEDS_GPU.search(f"{cls.message} {cls.cause}"):
        return "needs a GPU or the CUDA stack to import"
    missing = _NO_MODULE.search(cls.message) if cls.error_type == "ModuleNotFoundError" else None
    top = missing.group(1).split(".")[0] if missing else ""
    if top and top not in ("transformers", "vllm"):
        return f"needs {top}, which vLLM does not install"
    return cls


def compare(steps: Iterable[Step], compat: Compat, always_fail: frozenset[str]) -> Comparison:
    """The pair's comparison; ``always_fail``: architectures that failed with every
    transformers measured for this vLLM (left out)."""
    by = _by_name(steps)
    runtime_ok, first, verdict = vllm_verdict(by, compat)
    out: list[Disagreement] = []
    if verdict in ("missed", "false-alarm", "agree-other-cause"):
        failed = by.get(first)
        out.append(
            Disagreement(
                "vLLM",
                "other-cause" if verdict == "agree-other-cause" else verdict,
                f"{first}: {failed.said()}" if failed else "every start-up step ok",
                "; ".join(f.said() for f in compat.vllm_wide()) or "no finding",
            )
        )
    skipped: dict[str, int] = defaultdict(int)
    compared = agree = 0
    imports = all(by.get(n, Step(n, "not-run")).ok for n in ("import-vllm", "config-package"))
    for name in sorted(n for n in by if n.startswith("class:")):
        arch = name.removeprefix("class:")
        outcome = arch_outcome(by, arch)
        if runtime_ok is None or compat.ok is None or not imports:
            skipped["vLLM itself not measured or not imported"] += 1
            continue
        if isinstance(outcome, str) or arch in always_fail:
            skipped[outcome if isinstance(outcome, str) else "fails with every transformers"] += 1
            continue
        flagged = compat.scoped(arch)
        if flagged and not any(f.testable(arch) for f in flagged):
            skipped["config-level findings only, and no config of its model type"] += 1
            continue
        flagged = tuple(f for f in flagged if f.testable(arch))
        compared += 1
        if outcome.ok != bool(flagged):
            agree += 1
            continue
        kind = "false-alarm" if outcome.ok else "missed"
        said = f"{outcome.name}: {outcome.said()}" if not outcome.ok else "class imports"
        compat_said = "; ".join(f.said() for f in flagged) or "no finding"
        out.append(Disagreement(arch, kind, said, compat_said))
    return Comparison(
        runtime_ok,
        first,
        verdict,
        compared,
        agree,
        dict(sorted(skipped.items())),
        tuple(out),
        unseen(by.values(), compat) if runtime_ok is not None else (),
    )


def always_failing(runs: Iterable[Iterable[Step]]) -> frozenset[str]:
    """Architectures of one vLLM that never passed in any of two or more measured pairs."""
    seen: dict[str, list[bool]] = defaultdict(list)
    for steps in runs:
        by = _by_name(steps)
        if not by.get("import-vllm", Step("", "not-run")).ok:
            continue
        for name in by:
            if name.startswith("class:"):
                outcome = arch_outcome(by, name.removeprefix("class:"))
                if isinstance(outcome, Step):
                    seen[name.removeprefix("class:")].append(outcome.ok)
    return frozenset(a for a, oks in seen.items() if len(oks) >= 2 and not any(oks))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(results: Iterable[Mapping[str, Any]]) -> str:
    """The table of docs/run-time.md: one row per pair, the totals, then every disagreement,
    those of one pair with the same cause folded into one line."""
    rows = list(results)
    lines = [
        "| pair | vLLM declares | install | start-up (vLLM-wide) | compat | verdict "
        "| architectures agree / compared | missed | false alarms | findings seen failing |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    counts: dict[str, int] = defaultdict(int)
    arch_total = arch_agree = 0
    for r in rows:
        c, inst = r["comparison"], r["install"]
        declared = inst.get("declared") or "?"
        inside = {True: "in", False: "**outside**", None: "?"}[inst.get("in_declared_range")]
        how = (
            "as asked" if not inst.get("overrides") else "override " + ", ".join(inst["overrides"])
        )
        how = how if inst.get("ok") else f"failed: {inst.get('error', '')[:80]}"
        start = "ok" if c["runtime_ok"] else (c["failed_step"] or "not measured")
        compat = r["compat"]
        said = {True: "compatible", False: "not compatible", None: "no verdict"}[compat["ok"]]
        wide = sum(
            1
            for f in compat["findings"]
            if not any(
                f.get(k) for k in ("architectures", "model_types", "processors", "conditions")
            )
        )
        if compat["ok"] is False:
            said += f" ({wide} vLLM-wide)"
        seen = f"{wide - len(c['unseen'])} / {wide}" if wide and c["runtime_ok"] is not None else ""
        kinds = [d["kind"] for d in c["disagreements"] if d["scope"] != "vLLM"]
        counts[c["verdict"]] += 1
        arch_total += c["archs_compared"]
        arch_agree += c["archs_agree"]
        lines.append(
            f"| {r['pair']} | {_cell(declared)} ({inside}) | {_cell(how)} | {_cell(start)} "
            f"| {said} | {c['verdict']} | {c['archs_agree']} / {c['archs_compared']} "
            f"| {kinds.count('missed')} | {kinds.count('false-alarm')} | {seen} |"
        )
    agreeing = counts["agree"] + counts["agree-other-cause"]
    lines += [
        "",
        f"{len(rows)} pairs. vLLM-wide: {agreeing} agree (in {counts['agree-other-cause']} of "
        f"them compat's findings are not what failed), {counts['missed']} failures compat "
        f"missed, {counts['false-alarm']} false alarms, {counts['no-compat-verdict']} without "
        f"a compat verdict, {counts['not-measured']} not measured. Architectures: "
        f"{arch_agree} of {arch_total} comparisons agree.",
    ]
    notes = _disagreement_lines(rows)
    if notes:
        lines += ["", "Disagreements:", "", *notes]
    quiet = [
        f"- {r['pair']}: " + "; ".join(r["comparison"]["unseen"])
        for r in rows
        if r["comparison"]["unseen"]
    ]
    if quiet:
        lines += ["", "vLLM-wide findings no start-up step showed failing:", "", *quiet]
    return "\n".join(lines)


def _disagreement_lines(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    out = []
    label = {
        "missed": "compat missed a failure",
        "false-alarm": "compat raised a false alarm",
        "other-cause": "both say it fails, but compat's findings are not what failed",
    }
    for r in rows:
        groups: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        for d in r["comparison"]["disagreements"]:
            runtime = re.sub(r"^(class|config):\S+: ", "", d["runtime"])
            groups[(d["kind"], runtime, d["compat"])].append(d["scope"])
        for (kind, runtime, compat), scopes in groups.items():
            who = ", ".join(scopes[:3]) + (f" (+{len(scopes) - 3} more)" if len(scopes) > 3 else "")
            out.append(
                f"- {r['pair']}, {who}: {label[kind]}. Run time: `{runtime[:240]}`. "
                f"compat: {compat[:240]}."
            )
    return out
