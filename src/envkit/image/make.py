"""``envkit image``: a lock cell becomes a verified, labelled image.

The run, step by step (an interrupt at any step leaves no image envkit made tagged, and the
untagged one it built removed: it knows the image by the id file its own build wrote):

1. the cell is chosen and its lock read (``image.spec``), the context written
   (``image.context``); with ``--context`` alone envkit stops here;
2. the builder builds the context, untagged; a base whose Python or platform is not the
   cell's stops the build at its first step (``BaseMismatch``, exit 2);
3. envkit's probe runs inside the image, and ``env.verify.assess`` judges its facts against
   the profile exactly as ``envkit verify`` does; a failing check removes the image (exit 1);
4. only then is the image tagged, its digest read, and, with ``--save``, an archive written.
"""

from __future__ import annotations

import json
import subprocess
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path

from envkit.env.checks import Report
from envkit.env.facts import MAX_ANSWER, parse_facts
from envkit.env.verify import assess, facts_request
from envkit.errors import BadInput, CommandFailed, EnvironmentBroken, Interrupted, UnreadableFile
from envkit.image import context as ctx
from envkit.image.builder import Builder, Engine, host_bundle
from envkit.image.spec import ImageSpec
from envkit.io import process
from envkit.io.atomicfile import temporary_folder
from envkit.io.escaping import shell_command
from envkit.io.files import read_small_text
from envkit.io.pieces import Pieces
from envkit.io.uv import Uv
from envkit.profiles.profile import Profile
from envkit.progress import Progress, quiet

BUILD_TIMEOUT = 4 * 3600.0  # a vLLM image downloads gigabytes
STEP_TIMEOUT = 900.0  # a probe that imports vLLM, a tag, a save
TAIL_LINES = 40


class BaseMismatch(BadInput):
    """The base image's Python or platform is not the cell's."""


@dataclass(frozen=True)
class ImageOptions:
    base: str
    tag: str = ""
    context: Path | None = None  # write the context there (alone: do not build)
    build: bool = True
    save: Path | None = None  # an OCI archive to write


@dataclass(frozen=True)
class ImageResult:
    spec: ImageSpec
    base: str
    context: Path | None  # None when the context lived in a scratch folder
    containerfile: str
    build_command: tuple[str, ...]
    builder: str = ""
    isolation: str = ""
    isolation_note: str = ""
    image_id: str = ""  # '' when not built, or removed after failing
    digest: str = ""
    tag: str = ""
    saved: str = ""
    report: Report | None = None
    removed: bool = False  # built, failed verification, removed
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.report is None or self.report.ok


def make(
    profile: Profile,
    spec: ImageSpec,
    options: ImageOptions,
    builder: Builder | None,
    progress: Progress = quiet,
) -> ImageResult:
    """Write the context and, unless ``options.build`` is off, build, verify and tag it."""
    base = ctx.check_reference(options.base)
    if options.tag:
        ctx.check_reference(options.tag, "--tag", digest=False)
    with temporary_folder("image") as scratch:  # the id file, the probe's answer; the context
        folder = options.context or scratch / "context"  # --context: kept, the user's
        written = ctx.write(spec, base, folder, Uv().binary, facts_request(profile))
        return _built(profile, spec, options, builder, written, scratch, progress)


def _built(
    profile: Profile,
    spec: ImageSpec,
    options: ImageOptions,
    builder: Builder | None,
    written: ctx.Context,
    scratch: Path,
    progress: Progress,
) -> ImageResult:
    bundle = host_bundle()
    shown = builder or Builder(Engine.BUILDAH, "buildah", "", "")
    command = shown.build(written.folder, written.containerfile, None, bundle)
    result = ImageResult(
        spec=spec,
        base=options.base,
        context=options.context,
        containerfile=written.text,
        build_command=tuple(command),
        builder=builder.engine.value if builder else "",
        isolation=builder.isolation if builder else "",
        isolation_note=builder.why_isolation if builder else "",
        labels=written.labels,
    )
    if not options.build or builder is None:
        return result
    return _run(profile, spec, options, builder, written, bundle, result, scratch, progress)


@dataclass
class _Made:
    """What this run made so far: all an interrupt may undo, and all it may say."""

    image: str = ""  # built (by this run: its id file says so)
    verified: bool = False
    tagged: bool = False
    archive: Path | None = None  # being written by this run (it did not exist before)


def _run(
    profile: Profile,
    spec: ImageSpec,
    options: ImageOptions,
    builder: Builder,
    written: ctx.Context,
    bundle: str,
    result: ImageResult,
    scratch: Path,
    progress: Progress,
) -> ImageResult:
    made = _Made()
    iidfile = scratch / "image.iid"
    try:
        engine = builder.engine.value
        progress(f"building {spec.profile} / {spec.cell} on {options.base} with {engine}")
        argv = builder.build(written.folder, written.containerfile, iidfile, bundle)
        _build(argv, spec, options.base, progress)
        made.image = read_small_text(iidfile, 256, what="image id file").strip()
        imports = ", ".join(profile.checks.imports) or "nothing"
        progress(f"verifying inside image {made.image[:19]}: importing {imports}")
        report = _verify(profile, builder, made.image, scratch)
        if not report.ok:
            _quiet_run(builder.remove(made.image))
            return replace(result, report=report, removed=True)
        made.verified = True
        kept = f"Image {made.image} passed its checks and is kept"
        if options.tag:
            tag_it = shell_command(builder.tag(made.image, "TAG"))
            _checked(builder.tag(made.image, options.tag), "tagging the image",
                     hint=f"{kept}, untagged: `{tag_it}` tags it.")  # fmt: skip
            made.tagged = True
        digest = _digest(builder, made.image)
        if options.save is not None:
            progress(f"writing {options.save}")
            made.archive = None if options.save.exists() else options.save
            left = (
                "no archive was written" if made.archive is not None
                else f"{options.save}, which was there before, may be partly overwritten"
            )  # fmt: skip
            try:
                _checked(builder.save(made.image, options.save, options.tag), "saving the image",
                         hint=f"{kept}{f', tagged {options.tag}' if made.tagged else ''}; {left}. "
                         f"Check the folder of {options.save} (its permissions, its free "
                         "space).")  # fmt: skip
            except CommandFailed:
                if made.archive is not None:  # begun by this run, and not finished
                    made.archive.unlink(missing_ok=True)
                raise
            made.archive = None
        return replace(
            result,
            image_id=made.image,
            digest=digest,
            tag=options.tag,
            saved=str(options.save or ""),
            report=report,
        )
    except KeyboardInterrupt:
        raise Interrupted(_interrupted(spec, builder, made, options.tag)) from None


def _interrupted(spec: ImageSpec, builder: Builder, made: _Made, tag: str) -> str:
    """Undo what the interrupted run made and may undo (an unverified image; an archive it
    had begun), and say what is left, from what is true now."""
    what = f"Interrupted while building the image of {spec.profile} / {spec.cell}: "
    with process.signals_deferred():
        if made.archive is not None:
            made.archive.unlink(missing_ok=True)
        if made.verified:
            kept = f"image {made.image} passed its checks and is kept"
            return (
                what
                + kept
                + (f", tagged {tag}" if made.tagged else ", untagged")
                + ("; no archive was written." if made.archive is not None else ".")
            )
        gone = _quiet_run(builder.remove(made.image)) if made.image else True
    if not made.image:
        return what + "no image was built or tagged."
    if gone:
        return what + "no image was tagged, and the unverified image it had built was removed."
    remove = shell_command(builder.remove(made.image))
    return what + f"the unverified, untagged image {made.image} is left; `{remove}` removes it."


def _mismatch(spec: ImageSpec, base: str, said: str) -> BaseMismatch:
    """The base's own word (``envkit-base-check: differs 3.11 linux-x86_64``) as one
    paragraph naming both sides, the base that would fit and the cell that would."""
    words = said.split()
    python, platform = (words[2], words[3]) if len(words) >= 4 else ("?", "?")
    other = spec.cell.replace(f"py{spec.python}-", f"py{python}-", 1)
    return BaseMismatch(
        f"The base image {base} has Python {python} on {platform}; cell {spec.cell} of "
        f"{spec.profile} needs Python {spec.python} on {spec.platform}. Nothing was installed.",
        f"Use a base whose python3 is {spec.python} (python:{spec.python}-slim, say), or the "
        f"cell for this base's Python: --cell {other} (if {spec.profile} has it).",
    )


def _build(argv: list[str], spec: ImageSpec, base: str, progress: Progress) -> None:
    """Run the build, each of its steps a progress line; its last lines kept for a failure."""
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    base_said = ""
    child = process.stream(argv)
    pieces = Pieces(limit=4096)
    try:
        while True:
            data = child.read(1.0)
            if data is None:
                process.checkpoint()
                continue
            lines = pieces.feed(data) if data else pieces.flush()
            for raw in lines:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if not line.strip():
                    continue
                tail.append(line)
                if line.startswith(("STEP ", "Step ")):
                    progress(f"building: {line}")
                if line.startswith(ctx.BASE_CHECK_MARK + " differs "):
                    base_said = line
            if not data:
                break
        code = child.wait(60.0)
    finally:
        child.stop(5.0)
        child.close()
    if base_said:
        raise _mismatch(spec, base, base_said)
    if code != 0:
        returned = code if code is not None else -1
        engine = Path(argv[0]).name
        raise CommandFailed(
            argv, returned, "\n".join(tail), "The image build",
            f"Nothing was tagged. Check --base {base} (an image {engine} can pull, or holds: "
            f"`{engine} images`) and the step its last output stops at.",
        )  # fmt: skip


def _verify(profile: Profile, builder: Builder, image: str, scratch: Path) -> Report:
    out = scratch / "verify-out"
    out.mkdir(exist_ok=True)
    argv = [
        f"{ctx.VENV}/bin/python",
        f"{ctx.HOME}/probe.py",
        f"{ctx.HOME}/probe.json",
        "/envkit-out/facts.json",
    ]
    commands = builder.run(image, {str(out): "/envkit-out"}, argv)
    try:
        for command in commands[:-1] if len(commands) > 1 else commands:
            _checked(command, "running envkit's probe inside the image", timeout=STEP_TIMEOUT)
    finally:
        if len(commands) > 1:
            _quiet_run(commands[-1])
    try:
        data = json.loads(read_small_text(out / "facts.json", MAX_ANSWER, what="probe output"))
    except (UnreadableFile, ValueError, RecursionError):
        raise EnvironmentBroken(
            f"envkit's probe gave no facts inside image {image}.",
            "Run the image's /opt/venv/bin/python by hand: the interpreter may be broken.",
        ) from None
    return assess(profile, Path(ctx.VENV), parse_facts(data), gpu=None)


def _digest(builder: Builder, image: str) -> str:
    argv = builder.digest(image)
    if argv is None:
        return ""
    done = process.run(argv, timeout=STEP_TIMEOUT)
    text = (done.stdout or "").strip()
    return text if done.returncode == 0 and text.startswith("sha256:") and len(text) == 71 else ""


def _checked(argv: list[str], what: str, timeout: float = STEP_TIMEOUT, *, hint: str = "") -> None:
    done = process.run(argv, timeout=timeout, merge_stderr=True)
    if done.returncode != 0:
        raise CommandFailed(argv, done.returncode, done.stdout or "", what.capitalize(), hint)


def _quiet_run(argv: list[str]) -> bool:
    try:
        return process.run(argv, timeout=STEP_TIMEOUT).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
