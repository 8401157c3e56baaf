"""What every exported file carries: the lock cell (profile, cell, the lock's sha256 and the
versions it pins), the image (by digest), the plan's ``vllm serve`` arguments and the
environment vLLM runs with, the GPU layer's facts (the compute capabilities whose kernels
the pinned builds carry, the driver floor) and envkit's verdicts; and the checks every file
passes before it is written: each flag and variable through ``envkit lint``
(:func:`serving.lint.check.lint_args`), refused with the finding's fix when one is an error.

The engine modules (``kubernetes``, ``helm``, ``kserve``, ``ray``, ``slurm``) only arrange
these facts in their formats; nothing here knows an engine.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from envkit.errors import EXIT_CHECK_FAILED, BadInput, EnvkitError
from envkit.image.context import check_reference
from envkit.image.spec import ImageSpec
from envkit.io.redaction import has_credentials, is_secret_variable
from envkit.profiles.profile import Profile
from envkit.serving.lint import check as lint

PORT = 8000
GIB = 1024**3
MIB = 1024**2
ANNOTATION = "envkit"  # the annotation and label prefix: envkit/profile, envkit/lock-sha256
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}")
_NAME_CHARS = re.compile(r"[^a-z0-9]+")
# what a load takes before /health answers: start-up, profiling and CUDA graphs, plus the
# weights read at a slow network volume's pace (a first read; the page cache is faster)
LOAD_BASE_SECONDS = 180
LOAD_BYTES_PER_SECOND = 100 * MIB
SHM_PER_GPU = 2 * GIB  # vLLM's Kubernetes guide mounts 2Gi at /dev/shm for one GPU


class ExportRefused(EnvkitError):
    """A file envkit would write holds a flag or variable its vLLM refuses, or a verdict
    forbids it: nothing is written."""

    exit_code = EXIT_CHECK_FAILED


@dataclass(frozen=True)
class Image:
    """The image a file runs: its reference, pinned by digest unless a tag was allowed."""

    reference: str
    pinned: bool  # carries @sha256:

    @property
    def repository(self) -> str:
        """The name without tag or digest (Helm charts ask repository and tag apart)."""
        name = self.reference.split("@", 1)[0]
        last = name.rsplit("/", 1)
        if ":" in last[-1]:
            name = name.rsplit(":", 1)[0]
        return name

    @property
    def tag(self) -> str:
        name = self.reference.split("@", 1)[0]
        last = name.rsplit("/", 1)[-1]
        return last.rsplit(":", 1)[1] if ":" in last else ""

    @property
    def digest(self) -> str:
        return self.reference.split("@", 1)[1] if "@" in self.reference else ""


def image_for(reference: str | None, allow_tag: bool) -> Image | None:
    """The image asked (``--image``), checked; a tag alone is refused unless ``allow_tag``.
    None when none was given (the engine decides: Ray and Slurm run the venv)."""
    if reference is None:
        return None
    value = check_reference(reference, "--image")
    pinned = bool(_DIGEST.search(value))
    if not pinned and not allow_tag:
        raise BadInput(
            f"--image {value} names a tag, which may point at another image tomorrow.",
            "Give it by digest (REF@sha256:DIGEST: `envkit image` prints it), or pass "
            "--allow-tag to write the tag as given.",
        )
    return Image(value, pinned)


@dataclass(frozen=True)
class Facts:
    """One export's facts, engine-neutral."""

    name: str  # a DNS-1123 label for objects, jobs and services
    spec: ImageSpec  # the cell: profile, lock and its sha256, pins, CUDA, driver, kernels
    model: str  # as the user gave it: a Hub repo id or a local folder
    served: str  # what ``vllm serve`` is given where it runs
    local_weights: bool
    weights_bytes: int
    args: tuple[str, ...]  # the plan's vllm serve flags (no model, host or port)
    env: tuple[tuple[str, str], ...]  # plain variables every process of vLLM gets
    image: Image | None
    replicas: int = 1
    nodes: int = 1
    gpus_per_node: int = 1
    gpu_memory: int = 0  # the card the plan sized for (bytes, 0: none)
    verdicts: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def serve_args(self, port: int = PORT) -> list[str]:
        """``vllm serve``'s arguments after the model: host, port, the plan's flags, the
        parallelism the GPUs asked for (tensor within a node, pipeline across nodes, as
        vLLM's multi-node guide runs them)."""
        words = ["--host", "0.0.0.0", "--port", str(port), *self.args]
        if self.gpus_per_node > 1:
            words += ["--tensor-parallel-size", str(self.gpus_per_node)]
        if self.nodes > 1:
            words += ["--pipeline-parallel-size", str(self.nodes)]
            words += ["--distributed-executor-backend", "ray"]
        return words

    def load_seconds(self) -> int:
        """How long /health may take to answer: start-up plus the weights' read."""
        seconds = LOAD_BASE_SECONDS + self.weights_bytes / LOAD_BYTES_PER_SECOND
        return int(math.ceil(seconds / 10) * 10)

    def shm_bytes(self) -> int:
        return SHM_PER_GPU * max(1, self.gpus_per_node)

    def versions(self) -> dict[str, str]:
        return {n: self.spec.version(n) or "none" for n in ("vllm", "transformers", "torch")}

    def annotations(self) -> dict[str, str]:
        """The facts as ``envkit/KEY: value`` (Kubernetes annotations; comments elsewhere)."""
        spec = self.spec
        out = {
            f"{ANNOTATION}/profile": spec.profile,
            f"{ANNOTATION}/cell": spec.cell,
            f"{ANNOTATION}/lock-sha256": spec.lock_sha256,
            **{f"{ANNOTATION}/{k}": v for k, v in self.versions().items()},
            f"{ANNOTATION}/cuda": spec.cuda or "none",
            f"{ANNOTATION}/driver-floor": spec.driver or "none",
            f"{ANNOTATION}/compute-capabilities": spec.capabilities_text(),
            f"{ANNOTATION}/image": self.image.reference if self.image else "none",
        }
        for key, value in self.verdicts:
            out[f"{ANNOTATION}/verdict-{key}"] = value
        return out

    def comment_lines(self) -> list[str]:
        """The same facts as ``key: value`` lines (for ``#`` comments: one fact a line)."""
        lines = ["written by envkit export; regenerate rather than edit"]
        lines += [f"{k.removeprefix(ANNOTATION + '/')}: {v}" for k, v in self.annotations().items()]
        return lines


RAY_WAIT_SECONDS = 600


def ray_wait(nodes: int) -> list[str]:
    """A command that waits until ``nodes`` Ray nodes are alive (vLLM's multi-node guide
    starts the server only once the cluster is whole), failing after RAY_WAIT_SECONDS."""
    code = (
        "import time, ray\n"
        'ray.init(address="auto", logging_level="ERROR")\n'
        f"end = time.time() + {RAY_WAIT_SECONDS}\n"
        f'while sum(n["Alive"] for n in ray.nodes()) < {nodes}:\n'
        f'    assert time.time() < end, "fewer than {nodes} Ray nodes joined"\n'
        "    time.sleep(5)\n"
    )
    return ["python3", "-c", code]


def dns_name(text: str) -> str:
    """``text`` as a DNS-1123 label (lower case, digits, '-'; at most 63, letter first)."""
    name = _NAME_CHARS.sub("-", text.lower()).strip("-")
    if not name or not name[0].isalpha():
        name = f"vllm-{name}".rstrip("-")
    return name[:63].rstrip("-")


def comment(lines: list[str], marker: str = "#") -> str:
    """``lines`` as comments, each kept on one line (a newline in a value cannot end one),
    credentials masked in each line before it is escaped."""
    from envkit.io.escaping import visible
    from envkit.io.redaction import redact

    return "".join(f"{marker} {visible(redact(line), keep='')}\n" for line in lines)


def checked(profile: Profile, facts: Facts, what: str, args: list[str] | None = None) -> None:
    """``envkit lint`` on the flags and variables of one file (``what``): ExportRefused (exit
    1) naming the flag and the finding's fix when one is an error; BadInput when a variable
    would write a credential into the file."""
    env = dict(facts.env)
    for key, value in env.items():
        if is_secret_variable(key, value) or has_credentials(value):
            raise BadInput(
                f"{what} would write {key}'s value, a credential, into the file.",
                "Keep credentials in a Kubernetes Secret or the job's environment: envkit "
                "writes references to them, never their values.",
            )
    report = lint.lint_args(profile, facts.serve_args() if args is None else args, env)
    errors = [f for f in report.findings if f.severity == "error"]
    if errors:
        first = errors[0]
        more = f" ({len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ExportRefused(
            f"{what}: {first.subject}: {first.message}{more}; vLLM {report.vllm or '?'} of "
            f"{profile.name} would refuse it, so nothing was written.",
            first.fix,
        )


def served_path(model: str) -> tuple[str, bool]:
    """(what vllm serve is given, whether the weights are local): a folder stays its path."""
    path = Path(model)
    if path.is_dir():
        return str(path.absolute()), True
    return model, False
