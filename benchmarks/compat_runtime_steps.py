"""compat_runtime.py's helpers: child processes with deadlines, and the start-up steps run
inside a pair's venv (compat_runtime_child.py) read back."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compat_runtime_configs import CONFIGS

CHILD = Path(__file__).with_name("compat_runtime_child.py")


@dataclass(frozen=True)
class Step:
    name: str  # import-vllm, config-package, tokenizer:KIND, config:TYPE, class:ARCH
    status: str  # ok, error, timeout, not-run
    error_type: str = ""
    message: str = ""
    origin: str = ""  # the innermost vllm/ frame, path:line (where vLLM made the call)
    raised_in: str = ""  # the innermost vllm/ or transformers/ frame, when not the same
    cause: str = ""  # the root of a chained exception, "Type: first line"
    seconds: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def said(self) -> str:
        """One line for a table: ``Type: message (origin)``."""
        if self.ok:
            return "ok"
        text = f"{self.error_type}: {self.message}" if self.message else self.error_type
        return text + (f" ({self.origin})" if self.origin else "")


@dataclass(frozen=True)
class Done:
    code: int | None  # None: killed at the deadline
    seconds: float
    out: str
    err: str


def run(
    cmd: list[str], *, timeout: float, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Done:
    """A child in its own process group: at the deadline the whole group is killed (vLLM
    and uv start children of their own)."""
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env, cwd=cwd, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        code = None
    return Done(code, round(time.monotonic() - start, 1), out, err)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def child_env(work: Path) -> dict[str, str]:
    """No network, no GPU, caches under the work folder, quiet logs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HOME=str(work / "hf-home"),
        VLLM_CACHE_ROOT=str(work / "vllm-cache"),
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        VLLM_LOGGING_LEVEL="WARNING",
        TOKENIZERS_PARALLELISM="false",
        CUDA_VISIBLE_DEVICES="",
        OMP_NUM_THREADS="1",
    )
    return env


def run_startup(
    python: Path,
    folder: Path,
    classes: list[str],
    *,
    all_classes: bool,
    step_timeout: int,
    env: dict[str, str],
) -> list[Step]:
    """Every start-up step in ``python`` (a pair's venv). A child that stops answering (a
    hang the alarm cannot interrupt) is killed ``step_timeout`` + 60 s into its step, and one
    that dies (a crash in C code) leaves its step too: that step is recorded as such and a
    new child runs the steps after it (twice at most)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "startup_child.py"
    shutil.copyfile(CHILD, script)
    configs = {t: {"architecture": a, "config": c} for t, (a, c) in CONFIGS.items()}
    done: dict[str, Step] = {}
    limit = step_timeout + 60
    for attempt in range(3):
        spec = {
            "folder": str(folder / "fixtures"),
            "configs": configs,
            "classes": classes,
            "all_classes": all_classes,  # and then every other architecture of the registry
            "timeout": step_timeout,
            "skip": sorted(done),
        }
        (folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        out = folder / f"steps-{attempt}.jsonl"
        cmd = [str(python), str(script), str(folder / "spec.json"), str(out)]
        code, stuck = _watch(cmd, out, limit, env, folder / f"child-{attempt}.log")
        done.update({s.name: s for s in _read_steps(out)})
        if stuck is None:
            break
        if code is None:
            done[stuck] = Step(stuck, "timeout", "timeout", f"killed after {limit} s")
        else:
            done[stuck] = Step(stuck, "error", "crash", f"the child died with exit code {code}")
    return list(done.values())


def _watch(
    cmd: list[str], out: Path, limit: float, env: dict[str, str], log: Path
) -> tuple[int | None, str | None]:
    """Run the child, killing it when one step runs past ``limit`` seconds. Returns its exit
    code (None: killed) and the step it was in when it stopped (None: it finished)."""
    with log.open("w", encoding="utf-8") as sink:
        proc = subprocess.Popen(
            cmd, stdout=sink, stderr=subprocess.STDOUT, text=True, env=env,
            start_new_session=True,
        )  # fmt: skip
        current, since = None, time.monotonic()
        while proc.poll() is None:
            time.sleep(1)
            current, since = _current(_records(out), current, since)
            if current and time.monotonic() - since > limit:
                _kill_group(proc)
                proc.wait()
                return None, current
    records = _records(out)
    if records and records[-1].get("event") == "done":
        return proc.returncode, None
    last = records[-1] if records else {}
    started = str(last.get("step", "import-vllm")) if last.get("event") == "start" else None
    return proc.returncode, started


def _current(
    records: list[dict[str, Any]], current: str | None, since: float
) -> tuple[str | None, float]:
    last = records[-1] if records else None
    if last and last.get("event") == "start" and last["step"] != current:
        return str(last["step"]), time.monotonic()
    if last and last.get("event") == "end":
        return None, since
    return current, since


def _records(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            break  # a line being written
    return out


def _read_steps(path: Path) -> list[Step]:
    steps = []
    for r in _records(path):
        if r.get("event") != "end":
            continue
        steps.append(
            Step(
                name=str(r["step"]),
                status=str(r["status"]),
                error_type=str(r.get("error_type", "")),
                message=str(r.get("message", "")),
                origin=str(r.get("origin", "")),
                raised_in=str(r.get("raised_in", "")),
                cause=str(r.get("cause", "")),
                seconds=float(r.get("seconds", 0.0)),
                detail=dict(r.get("detail") or {}),
            )
        )
    return steps
