"""`envkit compat` against run-time truth: install each vLLM x transformers pair in a
throwaway venv, run what vLLM does at start-up there (CPU, no weights), and compare with
compat's answer for the pair.

For each pair: ``uv venv`` + ``uv pip install vllm==X transformers==Y`` (torch as vLLM pins
it, from the default index; one uv cache under --work). A pair vLLM's requirements exclude is
installed anyway through ``--override`` (``transformers==Y``; if that still does not resolve,
also the tokenizers and huggingface-hub that transformers Y resolves to alone), and marked
outside vLLM's declared range. Then, in the venv's python (compat_runtime_child.py), each in
its own try/except with a timeout: ``import vllm``, its config package, its tokenizer loader
on two tokenizer folders the harness writes (then the attributes its cached wrapper reads),
its config loader on configs of several model types, and every registry architecture's class
imported (``--architectures core``: those with configs and a few more). ``envkit compat ...
--json`` runs beside it, and compat_runtime_compare.py judges. Each venv is removed right
after its pair; the uv cache is emptied when free space runs low.

Run by hand (needs the package index; 1-4 minutes a pair, 5-9 GB at a time):

    python benchmarks/compat_runtime.py [--pairs 0.8.5:4.51.3,0.8.5:5.0.0] [--keep-going]
        [--out results.json] [--python 3.12] [--work DIR] [--resume] [--summary-only]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from compat_runtime_compare import Compat, Finding, always_failing, compare, markdown
from compat_runtime_configs import CLASS_ONLY, CONFIGS
from compat_runtime_steps import Step, child_env, run, run_startup

GiB = 1024**3
_TUPLES = ("architectures", "model_types", "config_values", "processors", "conditions")
# (vLLM, transformers, why): both sides of each known class, oldest vLLM first (pairs of one
# vLLM share a torch, so they run one after another on a warm uv cache)
DEFAULT_PAIRS = (
    ("0.8.5", "4.51.3", "shipped pin (vllm-0.8.5+qwen2-vl)"),
    ("0.8.5", "4.57.6", "newest 4.x: WHISPER_ATTENTION_CLASSES gone (MiniCPMO)"),
    ("0.8.5", "5.0.0", "5.x: tokenizer attribute removed; Qwen2-VL rope_type vs mrope"),
    ("0.9.0", "4.52.3", "its reference, below the aimv2 clash"),
    ("0.9.0", "4.54.1", "aimv2 registered by transformers too"),
    ("0.9.2", "4.53.1", "shipped pin (vllm-0.9.2)"),
    ("0.9.2", "4.53.3", "newest below 4.54 (aimv2)"),
    ("0.9.2", "4.54.0", "aimv2 registration clash"),
    ("0.9.2", "5.0.0", "aimv2 clash and 5.x tokenizer"),
    ("0.10.2", "4.56.1", "its reference"),
    ("0.10.2", "5.0.0", "5.x tokenizer; Qwen2-VL rope"),
    ("0.10.2", "5.3.0", "a later 5.x"),
    ("0.11.0", "4.56.2", "its reference"),
    ("0.11.0", "5.0.0", "5.x, inside its open range"),
    ("0.12.0", "4.57.3", "its reference"),
    ("0.12.0", "5.0.0", "outside its declared <5"),
    ("0.17.1", "4.57.6", "shipped pin (vllm-0.17.1+qwen3.5)"),
    ("0.17.1", "5.5.3", "outside its declared <5"),
    ("0.19.1", "4.57.6", "compat refuses: code under a 'Transformers v5 installed' branch"),
    ("0.19.1", "5.5.4", "its reference"),
    ("0.19.1", "5.2.0", "excluded by its !=5.2.*"),
    ("0.24.0", "5.12.1", "its reference"),
    ("0.24.0", "4.57.6", "outside its declared >=5.5.3"),
    ("0.28.0", "5.15.1", "its reference"),
    ("0.28.0", "5.5.3", "its declared floor, older than the reference"),
    ("0.28.0", "5.22.2", "inside its open range, newer than the release"),
    ("0.31.0", "5.17.0", "its reference"),
    ("0.31.0", "5.18.0", "outside its declared <5.18.0"),
    ("0.33.0", "5.20.2", "shipped pin (vllm-0.33.0)"),
    ("0.33.0", "5.24.0", "outside its declared <5.21.0"),
    ("0.33.0", "5.16.1", "its declared floor"),
)


@dataclass(frozen=True)
class Pair:
    vllm: str
    transformers: str
    why: str = ""

    @property
    def label(self) -> str:
        return f"{self.vllm}+{self.transformers}"


@dataclass(frozen=True)
class Install:
    ok: bool
    seconds: float
    overrides: tuple[str, ...] = ()  # what --override had to force ('' = installed as asked)
    declared: str = ""  # the transformers range vLLM's metadata declares
    in_declared_range: bool | None = None
    versions: dict[str, str] | None = None  # vllm, transformers, tokenizers, torch, ...
    error: str = ""


@dataclass(frozen=True)
class Settings:
    work: Path
    python: Path  # the interpreter each venv is made from
    envkit: Path  # the python whose envkit answers compat
    step_timeout: int = 300
    all_classes: bool = True
    min_free: int = 25 * GiB
    uv_cache: Path | None = None  # default: WORK/uv-cache

    @property
    def env(self) -> dict[str, str]:
        env = child_env(self.work)
        env.update(
            UV_CACHE_DIR=str(self.uv_cache or self.work / "uv-cache"),
            UV_HTTP_RETRIES="3",
            UV_PYTHON_DOWNLOADS="never",
            UV_NO_PROGRESS="1",
            UV_HTTP_TIMEOUT="300",
            ENVKIT_CACHE_DIR=str(self.work / "envkit-cache"),
        )
        return env


def uv() -> str:
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("uv") or "uv"


def _tail(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[-3:])[:400]


def install(pair: Pair, venv: Path, s: Settings) -> Install:
    """The pair in a new venv at ``venv``, forced through --override when its requirements
    do not resolve (vLLM excludes that transformers, or a package both pin differently)."""
    start = time.monotonic()
    made = run(
        [uv(), "venv", "--quiet", "--python", str(s.python), str(venv)], timeout=300, env=s.env
    )
    if made.code != 0:
        return Install(False, made.seconds, error=_tail(made.err))
    python = str(venv / "bin" / "python")
    asked = [f"vllm=={pair.vllm}", f"transformers=={pair.transformers}"]
    overrides: list[str] = []
    for attempt in range(3):
        cmd = [uv(), "pip", "install", "--python", python, *asked]
        if attempt:
            overrides = [f"transformers=={pair.transformers}"]
            if attempt == 2:
                overrides += _alone(pair.transformers, python, s, venv.parent)
            file = venv.parent / f"overrides-{pair.label}.txt"
            file.write_text("\n".join(overrides) + "\n", encoding="utf-8")
            cmd += ["--override", str(file)]
        done = run(cmd, timeout=3600, env=s.env)
        if done.code == 0:
            break
        if "No solution found" not in done.err:
            return Install(False, round(time.monotonic() - start, 1), error=_tail(done.err))
    else:
        return Install(
            False, round(time.monotonic() - start, 1), tuple(overrides), error=_tail(done.err)
        )
    versions = _freeze(python, s)
    declared = _declared(venv)
    inside = None
    if declared is not None:
        try:
            inside = declared.specifier.contains(Version(pair.transformers), prereleases=True)
        except InvalidVersion:
            inside = None
    return Install(
        True,
        round(time.monotonic() - start, 1),
        tuple(overrides),
        str(declared.specifier) if declared else "",
        inside,
        versions,
    )


def _alone(transformers: str, python: str, s: Settings, folder: Path) -> list[str]:
    """tokenizers and huggingface-hub as ``transformers==Y`` alone resolves them."""
    wanted = folder / "transformers-alone.txt"
    wanted.write_text(f"transformers=={transformers}\n", encoding="utf-8")
    done = run(
        [uv(), "pip", "compile", "--quiet", "--python", python, "--no-header", "--no-annotate",
         str(wanted)],
        timeout=600, env=s.env,
    )  # fmt: skip
    pins = [line.strip() for line in done.out.splitlines() if "==" in line]
    return [p for p in pins if p.split("==")[0] in ("tokenizers", "huggingface-hub")]


def _freeze(python: str, s: Settings) -> dict[str, str]:
    done = run([uv(), "pip", "freeze", "--python", python], timeout=120, env=s.env)
    wanted = ("vllm", "transformers", "tokenizers", "huggingface-hub", "torch", "triton",
              "cuda-bindings", "flashinfer-python", "xformers")  # fmt: skip
    pins = dict(line.split("==", 1) for line in done.out.splitlines() if "==" in line)
    return {name: pins[name] for name in wanted if name in pins}


def _declared(venv: Path) -> Requirement | None:
    """vLLM's own requirement on transformers, from its installed metadata."""
    for meta in venv.glob("lib/python*/site-packages/vllm-*.dist-info/METADATA"):
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
            if not line.startswith("Requires-Dist:"):
                continue
            try:
                req = Requirement(line.split(":", 1)[1].strip())
            except InvalidRequirement:
                continue
            if req.name == "transformers" and not (req.marker and "extra" in str(req.marker)):
                return req
    return None


def run_compat(pair: Pair, s: Settings) -> Compat:
    """``envkit compat vllm==X transformers==Y --json``; a crash or an error is an outcome."""
    cmd = [str(s.envkit), "-m", "envkit", "compat", f"vllm=={pair.vllm}",
           f"transformers=={pair.transformers}", "--json"]  # fmt: skip
    done = run(cmd, timeout=900, env=s.env)
    try:
        data = json.loads(done.out)
    except ValueError:
        return Compat(done.code, None, error=_tail(done.err or done.out), seconds=done.seconds)
    if done.code not in (0, 1) or "findings" not in data:
        error = data.get("error", data) if isinstance(data, dict) else data
        return Compat(done.code, None, error=str(error)[:400], seconds=done.seconds)
    findings = tuple(
        Finding(
            str(f["code"]), str(f["name"]), str(f["file"]), int(f["line"]),
            tuple(str(a) for a in f.get("architectures") or ()),
            tuple(str(t) for t in f.get("model_types") or ()),
            str(f.get("config_key") or ""),
            tuple(str(v) for v in f.get("config_values") or ()),
            tuple(str(v) for v in f.get("processors") or ()),
            tuple(str(v) for v in f.get("conditions") or ()),
        )
        for f in data["findings"]
    )  # fmt: skip
    skip = ("envkit", "ok", "findings", "cost", "wheels", "undecided", "vllm", "transformers")
    facts = {k: v for k, v in data.items() if k not in skip}
    return Compat(done.code, bool(data["ok"]), findings, facts, seconds=done.seconds)


def ensure_space(s: Settings, need: int, *, same_torch: bool) -> None:
    """Empty the uv cache when the free space would fall under --min-free-gb: before a pair
    of a new vLLM (whose torch is another), or whenever the floor itself is crossed. Refuse
    to go on when even that is not enough."""
    free = shutil.disk_usage(s.work).free
    if free - (0 if same_torch else need) >= s.min_free:
        return
    run([uv(), "cache", "clean"], timeout=1800, env=s.env)
    free = shutil.disk_usage(s.work).free
    if free - need < s.min_free:
        wanted = (s.min_free + need) / GiB
        raise SystemExit(f"only {free / GiB:.1f} GB free under {s.work}; need {wanted:.0f}")


def measure(
    pair: Pair, s: Settings, *, after: Pair | None = None, extra_classes: tuple[str, ...] = ()
) -> dict[str, Any]:
    """One pair, measured: install, start-up steps, compat (not yet compared). ``after``:
    the pair measured just before (the same vLLM installs the same torch)."""
    start = time.monotonic()
    ensure_space(s, 12 * GiB, same_torch=after is not None and after.vllm == pair.vllm)
    venv = s.work / f"venv-{pair.label}"
    folder = s.work / f"run-{pair.label}"
    shutil.rmtree(venv, ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)
    compat = run_compat(pair, s)
    steps: list[Step] = []
    try:
        inst = install(pair, venv, s)
        if inst.ok:
            scoped = sorted({a for f in compat.findings for a in f.architectures})
            classes = list(dict.fromkeys([*(a for a, _c in CONFIGS.values()), *CLASS_ONLY,
                                          *scoped, *extra_classes]))  # fmt: skip
            steps = run_startup(
                venv / "bin" / "python", folder, classes,
                all_classes=s.all_classes, step_timeout=s.step_timeout, env=s.env,
            )  # fmt: skip
    finally:
        shutil.rmtree(venv, ignore_errors=True)  # 5-9 GB each
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "pair": pair.label,
        "vllm": pair.vllm,
        "transformers": pair.transformers,
        "why": pair.why,
        "install": asdict(inst),
        **steps_to_json(steps),
        "compat": asdict(compat),
        "seconds": round(time.monotonic() - start, 1),
    }


def steps_to_json(steps: list[Step]) -> dict[str, Any]:
    """Steps for the results file: architectures whose class imported only by name."""
    ok = [s.name.removeprefix("class:") for s in steps if s.name.startswith("class:") and s.ok]
    rest = [asdict(s) for s in steps if not (s.name.startswith("class:") and s.ok)]
    return {"steps": rest, "classes_ok": ok}


def steps_from_json(result: dict[str, Any]) -> list[Step]:
    steps = [Step(**s) for s in result.get("steps", [])]
    return steps + [Step(f"class:{a}", "ok") for a in result.get("classes_ok", [])]


def compat_from_json(data: dict[str, Any]) -> Compat:
    findings = tuple(
        Finding(**{**f, **{k: tuple(f[k]) for k in _TUPLES if k in f}}) for f in data["findings"]
    )
    return Compat(**{**data, "findings": findings})


def judge(results: list[dict[str, Any]]) -> None:
    """(Re)compare every measured pair: whether an architecture fails with every
    transformers depends on all pairs of its vLLM."""
    by_vllm: dict[str, list[list[Step]]] = {}
    for r in results:
        by_vllm.setdefault(r["vllm"], []).append(steps_from_json(r))
    for r in results:
        if not r["install"]["ok"]:
            r["comparison"] = asdict(compare([], compat_from_json(r["compat"]), frozenset()))
            r["comparison"].update(runtime_ok=None, verdict="not-measured", failed_step="install")
            continue
        always = always_failing(by_vllm[r["vllm"]])
        r["comparison"] = asdict(compare(steps_from_json(r), compat_from_json(r["compat"]), always))


def parse_pairs(text: str | None) -> list[Pair]:
    if not text:
        return [Pair(*p) for p in DEFAULT_PAIRS]
    why = {(v, t): w for v, t, w in DEFAULT_PAIRS}
    pairs = []
    for item in text.split(","):
        vllm, _sep, transformers = item.strip().partition(":")
        try:
            Version(vllm), Version(transformers)
        except InvalidVersion:
            raise SystemExit(
                f"--pairs: {item!r} is not VLLM:TRANSFORMERS (e.g. 0.8.5:4.51.3)"
            ) from None
        pairs.append(Pair(vllm, transformers, why.get((vllm, transformers), "")))
    return sorted(pairs, key=lambda p: Version(p.vllm))  # pairs of one torch side by side


def write(out: Path, results: list[dict[str, Any]]) -> None:
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"format": 1, "pairs": results}, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--pairs", help="VLLM:TRANSFORMERS,... (default: the built-in list)")
    parser.add_argument(
        "--keep-going", action="store_true", help="go on after a pair fails to install"
    )
    parser.add_argument("--out", type=Path, default=Path("compat_runtime.json"), help="results")
    parser.add_argument("--python", default="3.12", help="the venvs' Python (version or path)")
    parser.add_argument("--work", type=Path, help="venvs and the uv cache (default: a temp folder)")
    parser.add_argument(
        "--architectures", choices=("all", "core"), default="all", help="classes imported"
    )
    parser.add_argument("--step-timeout", type=int, default=300, help="seconds per step")
    parser.add_argument("--min-free-gb", type=int, default=25, help="free space to keep")
    parser.add_argument("--resume", action="store_true", help="keep the pairs --out has")
    parser.add_argument("--summary-only", action="store_true", help="print --out's table")
    args = parser.parse_args(argv)
    results: list[dict[str, Any]] = []
    if (args.resume or args.summary_only) and args.out.exists():
        results = json.loads(args.out.read_text(encoding="utf-8"))["pairs"]
    if args.summary_only:
        judge(results)
        print(markdown(results))
        return 0
    from envkit.env.interpreters import find_interpreter

    work = args.work or Path(tempfile.gettempdir()) / "envkit-compat-runtime"
    work.mkdir(parents=True, exist_ok=True)
    s = Settings(
        work=work.resolve(),
        python=find_interpreter(">=3.8", args.python).path,
        envkit=Path(sys.executable),
        step_timeout=args.step_timeout,
        all_classes=args.architectures == "all",
        min_free=args.min_free_gb * GiB,
    )
    done = {r["pair"] for r in results}
    previous = None
    for pair in parse_pairs(args.pairs):
        if pair.label in done:
            continue
        print(
            f"{pair.label}: measuring ({shutil.disk_usage(work).free / GiB:.0f} GB free)",
            flush=True,
        )
        result = measure(pair, s, after=previous)
        previous = pair
        results.append(result)
        results.sort(key=lambda r: Version(r["vllm"]))  # stable: a vLLM's pairs in run order
        judge(results)
        write(args.out, results)
        c = result["comparison"]
        print(f"{pair.label}: {c['verdict']} ({result['seconds']} s)", flush=True)
        if not result["install"]["ok"] and not args.keep_going:
            print(f"{pair.label}: install failed: {result['install']['error']}", file=sys.stderr)
            break
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
