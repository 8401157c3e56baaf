"""What a boot log says about the start besides its errors: the vLLM version, the model, its
type and architectures, the GPU named, the weights' size, the engine arguments (vLLM's
``non-default args: {...}`` and ``args: Namespace(...)`` dumps, a ``vllm serve ...`` command
line) and environment variables (``NAME=value`` dumps, ``-e NAME=value``, assignments before
the command, vLLM's "Unknown vLLM environment variable detected").

:class:`FactReader` reads normalised lines one at a time; :meth:`FactReader.facts` is the
frozen result. Every collection is bounded (the first values win; a log repeats itself).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from envkit.serving.explain.logread import LogLine
from envkit.serving.explain.signatures import in_order

MAX_ITEMS = 400  # arguments or variables kept from one log
MAX_VALUE = 300  # characters of one value kept
MAX_NAMES = 5  # GPU names, architectures

_VERSION = re.compile(
    r"vLLM (?:API )?server version (?P<v>\d[\w.+-]*?),?(?:\s|$)"
    r"|Initializing an? (?:V1 )?LLM engine \(v(?P<w>\d[\w.+-]*)\)"
    r"|[█▄▀]\s+version\s+(?P<x>\d[\w.+-]*)"
)
_MODEL = re.compile(r"serving model (?P<m>\S+)|\bmodel='(?P<n>[^']+)'")
_ARCH = re.compile(r"Resolved architecture: (?P<a>\w+)")
_GPU = re.compile(
    r"\b(?:NVIDIA|GeForce|Tesla|Quadro)\s+(?P<g>[A-Za-z0-9][\w-]*"
    r"(?:\s+(?!GPU\b|with\b|has\b|On\b|Off\b|driver\b|is\b)[A-Za-z0-9][\w-]*){0,3})"
)
_WEIGHTS = re.compile(r"Model loading took (?P<g>[\d.]+) ?GiB")
_TRANSFORMERS = re.compile(r"\btransformers(?:==|-| version )(?P<v>\d+\.\d+(?:\.\d+)?)\b")
# every pattern here is linear on any line (see signatures.in_order)
_ARGS = re.compile(
    in_order("non-default args: ")
    + r"(?P<d>\{.*\})|"
    + in_order(r"\bargs: Namespace\(")
    + r"(?P<n>.*)"  # to the line's end: a dump cut short (or broken by a newline) still counts
)
_COMMAND = re.compile(
    r"(?:^|[\s$#>'\"])(?:vllm serve|vllm\.entrypoints\.(?:openai\.)?api_server)\b"
)
# a name with an underscore after its first letter: up to the first, then the rest
_ENV_LINE = re.compile(
    r"(?<![\w-])(?:export |declare -x )?(?P<k>[A-Z][A-Z0-9]*_[A-Z0-9_]+)=(?P<v>.*)"
)
_ENV_OPTION = re.compile(r"(?:-e|--env)[ =](?P<k>[A-Z][A-Z0-9_]+)=(?P<v>[^\s'\"]*)")
_UNKNOWN_ENV = re.compile(r"Unknown vLLM environment variable detected: (?P<k>\w+)")
_DRIVER = re.compile(r"Driver Version: (?P<d>\d+\.\d+(?:\.\d+)?)\s+CUDA Version: (?P<c>\d+\.\d+)")
_VLLM_WORD = re.compile(r"(?i)\bvllm\b")
_INTERNAL_BIND = re.compile(r"get_open_port|TCPStore|_create_c10d_store|rendezvous")
_WSL_PIN = re.compile(r"pin_memory=False'? as WSL is detected")


@dataclass(frozen=True)
class Facts:
    vllm_version: str = ""
    transformers_version: str = ""
    model: str = ""
    architectures: tuple[str, ...] = ()
    gpu_names: tuple[str, ...] = ()
    weights_gib: float | None = None
    args: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    unknown_env: tuple[str, ...] = ()  # variables vLLM said it does not know
    wsl_pin_memory_off: bool = False
    dump_lines: frozenset[int] = frozenset()  # lines that are argument or variable dumps
    # not in to_dict: what fixes and explain's context rules read
    driver: str = ""  # nvidia-smi's driver version and the CUDA it runs
    driver_cuda: str = ""
    vllm_seen: bool = False  # a line carried vLLM's header, process prefix or name
    weights_line: int | None = None  # the "Model loading took" line
    resolved: tuple[tuple[str, int], ...] = ()  # (architecture, line) vLLM resolved
    last_info: tuple[int, str] = (0, "")  # the last line read that was not an error
    internal_bind: tuple[int, ...] = ()  # frames of vLLM's or torch's own port binding

    def to_dict(self) -> dict[str, Any]:
        return {
            "vllm_version": self.vllm_version or None,
            "transformers_version": self.transformers_version or None,
            "model": self.model or None,
            "architectures": list(self.architectures),
            "gpu_names": list(self.gpu_names),
            "weights_gib": self.weights_gib,
            "args": dict(self.args),
            "env": dict(self.env),
            "unknown_env": list(self.unknown_env),
            "wsl_pin_memory_off": self.wsl_pin_memory_off,
        }


def split_top(text: str, sep: str = ",") -> list[str]:
    """``text`` split at ``sep`` outside brackets and quotes (a Python repr)."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
            if len(parts) >= MAX_ITEMS:
                return parts
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _unquote(value: str) -> str:
    value = value.strip()[:MAX_VALUE]
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def parse_dump(line: str) -> dict[str, str]:
    """The arguments of vLLM's ``non-default args: {...}`` or ``args: Namespace(...)``."""
    m = _ARGS.search(line)
    if not m:
        return {}
    found: dict[str, str] = {}
    if m.group("d") is not None:
        for item in split_top(m.group("d")[1:-1]):
            key, colon, value = item.partition(":")
            if colon:
                found[_unquote(key)] = _unquote(value)
    else:
        body = m.group("n").rstrip()
        for item in split_top(body[:-1] if body.endswith(")") else body):
            key, eq, value = item.partition("=")
            if eq and key.isidentifier():
                found[key] = _unquote(value)
    return found


def parse_command(line: str) -> tuple[dict[str, str], dict[str, str]]:
    """(arguments, environment) of a ``vllm serve MODEL --opt value ...`` command line:
    options by vLLM's names (``max_model_len``), flags as ``true``, the model as
    ``model_tag``; ``NAME=value`` before the command and ``-e NAME=value`` as variables."""
    m = _COMMAND.search(line)
    if not m:
        return {}, {}
    env = {k: _unquote(v) for k, v in _ENV_OPTION.findall(line[: m.start() + 1])}
    try:
        before = shlex.split(line[: m.start() + 1])[-MAX_ITEMS:]
        words = shlex.split(line[m.end() :])[:MAX_ITEMS]
    except ValueError:  # an unclosed quote: plain words
        before, words = line[: m.start() + 1].split(), line[m.end() :].split()[:MAX_ITEMS]
    for word in before:
        if (e := _ENV_LINE.fullmatch(word)) and not word.startswith("-"):
            env[e.group("k")] = _unquote(e.group("v"))
    args: dict[str, str] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            key = name.replace("-", "_")
            if eq:
                args[key] = value[:MAX_VALUE]
            elif i + 1 < len(words) and not words[i + 1].startswith("--"):
                args[key] = words[i + 1][:MAX_VALUE]
                i += 1
            else:
                args[key] = "true"
        elif i == 0 and "model_tag" not in args:
            args["model_tag"] = word[:MAX_VALUE]
        i += 1
    return args, env


class FactReader:
    """Reads the facts out of normalised lines, one at a time."""

    def __init__(self) -> None:
        self.version = self.transformers = self.model = ""
        self.architectures: list[str] = []
        self.gpus: list[str] = []
        self.weights: float | None = None
        self.args: dict[str, str] = {}
        self.env: dict[str, str] = {}
        self.unknown_env: list[str] = []
        self.wsl_pin_off = False
        self.dumps: set[int] = set()
        self.driver = self.driver_cuda = ""
        self.vllm_seen = False
        self.weights_line: int | None = None
        self.resolved: list[tuple[str, int]] = []
        self.last_info: tuple[int, str] = (0, "")
        self.internal_bind: list[int] = []

    def read(self, line: LogLine) -> None:
        text = line.text
        if not self.version and (m := _VERSION.search(text)):
            self.version = m.group("v") or m.group("w") or m.group("x")
        if not self.model and (m := _MODEL.search(text)):
            self.model = (m.group("m") or m.group("n"))[:MAX_VALUE]
        if (m := _ARCH.search(text)) and len(self.architectures) < MAX_NAMES:
            self.note_architecture(m.group("a"))
            self.resolved.append((m.group("a"), line.number))
        if not self.driver and (m := _DRIVER.search(text)):
            self.driver, self.driver_cuda = m.group("d"), m.group("c")
        self.vllm_seen = self.vllm_seen or line.vllm or bool(_VLLM_WORD.search(text))
        if _INTERNAL_BIND.search(text) and len(self.internal_bind) < MAX_ITEMS:
            self.internal_bind.append(line.number)
        if line.level in ("INFO", "DEBUG"):
            self.last_info = (line.number, text[:MAX_VALUE])
        for m in _GPU.finditer(text):
            if m.group("g") not in self.gpus and len(self.gpus) < MAX_NAMES:
                self.gpus.append(m.group("g"))
        if self.weights is None and (m := _WEIGHTS.search(text)):
            self.weights = float(m.group("g"))
            self.weights_line = line.number
        if not self.transformers and (m := _TRANSFORMERS.search(text)):
            self.transformers = m.group("v")
        m = _UNKNOWN_ENV.search(text)
        if m and m.group("k") not in self.unknown_env and len(self.unknown_env) < MAX_ITEMS:
            self.unknown_env.append(m.group("k"))
        self.wsl_pin_off = self.wsl_pin_off or bool(_WSL_PIN.search(text))
        self._dumps(line)

    def note_architecture(self, name: str) -> None:
        if name not in self.architectures:
            self.architectures.append(name)

    def _dumps(self, line: LogLine) -> None:
        text = line.text
        found_args = parse_dump(text) if "args" in text else {}
        command_args, command_env = parse_command(text) if "vllm" in text else ({}, {})
        env = dict(command_env)
        if e := _ENV_LINE.fullmatch(text.strip()):
            env[e.group("k")] = _unquote(e.group("v"))
        env.update({k: _unquote(v) for k, v in _ENV_OPTION.findall(text)})
        for source, target in ((found_args, self.args), (command_args, self.args), (env, self.env)):
            for key, value in source.items():
                if len(target) < MAX_ITEMS:
                    target.setdefault(key, value)
        if (found_args or command_args or env) and len(self.dumps) < MAX_ITEMS * 10:
            self.dumps.add(line.number)
        if not self.model:
            self.model = self.args.get("model") or self.args.get("model_tag") or ""

    def facts(self) -> Facts:
        return Facts(
            vllm_version=self.version,
            transformers_version=self.transformers,
            model=self.model,
            architectures=tuple(self.architectures),
            gpu_names=tuple(self.gpus),
            weights_gib=self.weights,
            args=dict(self.args),
            env=dict(self.env),
            unknown_env=tuple(self.unknown_env),
            wsl_pin_memory_off=self.wsl_pin_off,
            dump_lines=frozenset(self.dumps),
            driver=self.driver,
            driver_cuda=self.driver_cuda,
            vllm_seen=self.vllm_seen,
            weights_line=self.weights_line,
            resolved=tuple(self.resolved),
            last_info=self.last_info,
            internal_bind=tuple(self.internal_bind),
        )
