"""envkit image: a lock cell becomes a verified, labelled image.

The first tests write the build context alone (no builder needed); the ``container`` ones run
the real buildah on a Debian base made on this machine (tests/image/base.py), installing the
tiny test wheels from an index on 127.0.0.1.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envkit.errors import BadInput
from envkit.image.context import check_reference

import indexserver
import wheelhouse
from base import buildah, ensure_base
from conftest import Indexes
from helpers import Result, envkit, made_once, output

CELL = "py3.11-linux-x86_64-cu124"  # the Debian bookworm base's Python


def profile(probes: tuple[str, ...] = ()) -> str:
    listed = ", ".join(f'"{p}"' for p in probes)
    return f"""description = "image test"
python = ">=3.10"
requirements = ["vllm==0.8.5"]
constraints = ["transformers==4.51.3"]

[torch]
backend = "cu124"

[verify]
imports = ["vllm", "transformers", "torch"]
probes = [{listed}]

[matrix]
python = ["3.11", "3.12"]
platforms = ["linux-x86_64"]
backends = ["cu124"]
"""


def locked(root: Path, index: str, name: str = "m", probes: tuple[str, ...] = ()) -> Path:
    (root / "envs").mkdir(exist_ok=True)
    (root / "envs" / f"{name}.toml").write_text(profile(probes))
    envkit("lock", name, "--index-url", index, "--torch-index", "default", cwd=root).assert_ok()
    return root


@pytest.fixture(scope="module")
def _locked_once(tmp_path_factory: pytest.TempPathFactory, indexes: Indexes) -> Path:
    """The module's one lock, made once a run (helpers.made_once), copied by ``project``."""
    return made_once(tmp_path_factory, "locked-image", lambda root: locked(root, indexes.default))


@pytest.fixture
def project(tmp_path: Path, _locked_once: Path) -> Path:
    """A locked project of its own: the one lock of this module, copied (a lock writes the
    same bytes each time, tests/lock/test_lock.py; these tests are of image, not of lock)."""
    shutil.copytree(_locked_once, tmp_path, dirs_exist_ok=True)
    return tmp_path


def test_the_context_alone_installs_exactly_the_lock_and_checks_the_base_first(
    project: Path,
) -> None:
    context = project / "ctx"
    res = envkit(
        "image",
        "m",
        "--cell",
        CELL,
        "--base",
        "debian:bookworm",
        "--context",
        str(context),
        "--json",
        cwd=project,
    )
    res.assert_ok()
    data = output("image", res.out)
    assert data["built"] is False and data["image_id"] is None
    lock = project / "constraints" / "m" / f"{CELL}.txt"
    assert (context / "envkit" / "requirements.txt").read_bytes() == lock.read_bytes()
    assert data["lock"]["sha256"] == __import__("hashlib").sha256(lock.read_bytes()).hexdigest()
    text = (context / "Containerfile").read_text()
    lines = text.splitlines()
    check = next(i for i, line in enumerate(lines) if "check_base.py" in line and "RUN" in line)
    install = next(i for i, line in enumerate(lines) if '"sync"' in line)
    assert check < install, "the base is checked before anything installs"
    assert '"--require-hashes"' in lines[install] and "compile" not in text
    assert "type=secret,id=envkit-ca" in lines[install]  # the CA bundle: a build secret
    assert (context / "envkit" / "uv").is_file() and "COPY envkit/uv" not in text  # bound in
    labels = data["labels"]
    assert labels["envkit.profile"] == "m" and labels["envkit.cell"] == CELL
    assert labels["envkit.lock.sha256"] == data["lock"]["sha256"]
    assert labels["envkit.vllm"] == "0.8.5" and labels["envkit.transformers"] == "4.51.3"
    assert labels["envkit.cuda"] == "12.4" and labels["envkit.driver.floor"] == "550.54.14"
    assert labels["org.opencontainers.image.base.name"] == "debian:bookworm"
    for key, value in labels.items():
        assert f"LABEL {json.dumps(key)}={json.dumps(value)}" in text
    # the command shown runs as written (no id file of envkit's own in it)
    assert data["build_command"][-1] == str(context) and "--iidfile" not in data["build_command"]


def test_a_context_folder_of_someone_elses_is_never_written(project: Path) -> None:
    theirs = project / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    res = envkit(
        "image",
        "m",
        "--cell",
        CELL,
        "--base",
        "debian:bookworm",
        "--context",
        str(theirs),
        cwd=project,
    )
    res.assert_fails(2, mentioning="not a context envkit wrote")
    assert sorted(p.name for p in theirs.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--cell", "py3.9-linux-x86_64-cu124"], "has no cell"),
        (["--cell", CELL, "--base", "debian bookworm"], "not an image reference"),
        (["--cell", CELL, "--base", "debian:bookworm\nRUN rm -rf /"], "not an image reference"),
        (["--cell", CELL, "--tag", "x y"], "not an image reference"),
        (["--cell", CELL, "--tag", "localhost/m:1@sha256:" + "a" * 64], "names a digest"),
        (
            ["--cell", CELL, "--index-url", "https://user:s3cretpass@mirror.test/simple"],
            "holds credentials",
        ),
        (
            ["--cell", CELL, "--no-build", "--save", "oci-archive:/tmp/x.tar"],
            "--save needs a build",
        ),
    ],
)
def test_bad_input_is_one_paragraph_and_exit_2(project: Path, args: list[str], says: str) -> None:
    base = [] if "--base" in args else ["--base", "debian:bookworm"]
    res = envkit("image", "m", *base, *args, "--context", str(project / "c"), cwd=project)
    res.assert_fails(2, mentioning=says)
    assert "Traceback" not in res.err and "s3cretpass" not in res.out + res.err
    assert not (project / "c").exists() or not any((project / "c").iterdir())


def test_a_stale_cell_is_refused_with_the_command_that_relocks_it(project: Path) -> None:
    path = project / "envs" / "m.toml"
    path.write_text(path.read_text().replace("image test", "image test, edited"))
    res = envkit(
        "image",
        "m",
        "--cell",
        CELL,
        "--base",
        "debian:bookworm",
        "--context",
        str(project / "c"),
        cwd=project,
    )
    res.assert_fails(2, mentioning=("stale", f"envkit lock m --cell {CELL}"))


@given(st.text(max_size=80))
def test_a_base_reference_never_carries_a_line_or_a_shell_word(text: str) -> None:
    try:
        value = check_reference(text)
    except BadInput:
        return
    assert not set(value) & set(" \t\r\n\"'$`\\;&|<>(){}[]*?!#")


# ---- the real builder -------------------------------------------------------------------


@pytest.fixture(scope="module")
def base_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    return ensure_base(tmp_path_factory.mktemp("base"))


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The tiny wheels on 127.0.0.1: the build inside buildah reaches them there."""
    folder = tmp_path_factory.mktemp("image-index")
    for wheel in (
        wheelhouse.vllm(),
        wheelhouse.transformers("4.51.3", with_attribute=True),
        wheelhouse.torch("2.6.0", cuda="12.4"),
    ):
        wheel.write(folder)
    with indexserver.serve(folder) as server:
        yield indexserver.url(server)


def build(root: Path, base: str, index: str, *extra: str, cell: str = CELL) -> tuple[str, Result]:
    """``envkit image m`` of ``cell`` on ``base`` from ``index``, tagged with a fresh tag."""
    tag = f"localhost/envkit-test/m:{uuid.uuid4().hex[:8]}"
    args = ["--cell", cell, "--base", base, "--tag", tag, "--index-url", index, *extra]
    return tag, envkit("image", "m", *args, cwd=root)


def _exists(ref: str) -> bool:
    return buildah("inspect", "--type", "image", ref, check=False).returncode == 0


@pytest.mark.container
def test_buildah_builds_verifies_labels_tags_and_saves_an_image(
    tmp_path: Path, base_image: str, index: str
) -> None:
    archive = tmp_path / "m.tar"
    tag, res = build(
        locked(tmp_path, index), base_image, index, "--save", f"oci-archive:{archive}", "--json"
    )
    try:
        res.assert_ok()
        data = output("image", res.out)
        assert data["image_id"].startswith("sha256:") and data["digest"].startswith("sha256:")
        assert (
            data["isolation"] == "chroot" and "cannot create namespaces" in data["isolation_note"]
        )
        checks = {c["name"]: c["status"] for c in data["verification"]["checks"]}
        assert checks["vllm"] == checks["transformers"] == checks["torch"] == "pass"
        inspected = json.loads(buildah("inspect", "--type", "image", tag).stdout)
        labels = inspected["OCIv1"]["config"]["Labels"]
        assert labels["envkit.lock.sha256"] == data["lock"]["sha256"]
        assert (
            labels["envkit.compute-capabilities"] == data["labels"]["envkit.compute-capabilities"]
        )
        inside = _run_in(
            tag,
            "/opt/venv/bin/python",
            "-c",
            "import vllm, transformers, torch; "
            "print(vllm.__version__, transformers.__version__, torch.version.cuda)",
        )
        assert inside.split() == ["0.8.5", "4.51.3", "12.4"]
        # neither uv nor the host's CA bundle is in the image
        left = _run_in(tag, "sh", "-c", "ls -A /opt/envkit /run/envkit /run/secrets")
        assert "uv" not in left.split() and "envkit-ca" not in left
        assert archive.stat().st_size > 1_000_000
        assert "envkit-verify" not in buildah("containers", "--format", "{{.ContainerName}}").stdout
    finally:
        buildah("rmi", tag, check=False)


@pytest.mark.container
def test_an_archive_the_folder_cannot_hold_leaves_the_image_tagged_and_no_part_of_it(
    tmp_path: Path, base_image: str, index: str
) -> None:
    """--save into a 256 KiB file system: it takes envkit's check before the build, then the
    real buildah runs out of space writing the archive. The verified image stays, tagged;
    the part of the archive this run began is removed; the paragraph says what is kept and
    what to check; exit 1."""
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(small)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"a small file system cannot be mounted here: {mounted.stderr.strip()}")
    try:
        archive = small / "m.tar"
        saving = ("--save", f"oci-archive:{archive}")
        tag, res = build(locked(tmp_path, index), base_image, index, *saving)
        try:
            res.assert_fails(1, mentioning=(
                "Saving the image failed", "passed its checks and is kept", f"tagged {tag}",
                "no archive was written", "free space",
            ))  # fmt: skip
            assert "Traceback" not in res.err and _exists(tag)
            assert sorted(p.name for p in small.iterdir()) == []
        finally:
            buildah("rmi", tag, check=False)
    finally:
        subprocess.run(["umount", str(small)], check=False)


@pytest.mark.container
def test_a_base_with_another_python_is_refused_before_anything_installs(
    tmp_path: Path, base_image: str, index: str
) -> None:
    root = locked(tmp_path, index)
    tag, res = build(root, base_image, index, cell="py3.12-linux-x86_64-cu124")
    res.assert_fails(
        2,
        mentioning=(
            "has Python 3.11",
            "needs Python 3.12",
            "Nothing was installed",
            f"--cell {CELL}",
        ),
    )
    assert "Traceback" not in res.err and not _exists(tag)


@pytest.mark.container
def test_an_image_whose_checks_fail_is_removed_and_never_tagged(
    tmp_path: Path, base_image: str, index: str
) -> None:
    root = locked(tmp_path, index, probes=("transformers.NotThere",))
    before = set(buildah("images", "-q", "--no-trunc").stdout.split())
    tag, res = build(root, base_image, index, "--json")
    assert res.code == 1, res.out + res.err
    data = output("image", res.out)
    assert data["removed"] is True and data["image_id"] is None and data["tag"] is None
    failed = [c for c in data["verification"]["checks"] if c["status"] == "fail"]
    assert [c["name"] for c in failed] == ["transformers.NotThere"]
    assert not _exists(tag)
    assert set(buildah("images", "-q", "--no-trunc").stdout.split()) <= before
    text = envkit(
        "image", "m", "--cell", CELL, "--base", base_image, "--index-url", index, cwd=root
    )
    assert text.code == 1 and "transformers.NotThere" in text.out and "was removed" in text.out


@pytest.mark.container
def test_a_base_the_builder_cannot_have_is_one_paragraph_with_what_to_check(
    tmp_path: Path, index: str
) -> None:
    """A base no registry serves (here a loopback one that refuses): the builder's own last
    lines, that nothing was tagged, and what to check, naming the builder; exit 1."""
    root = locked(tmp_path, index)
    tag, res = build(root, "localhost/envkit-test/absent:none", index)
    res.assert_fails(1, mentioning=("The image build failed", "Nothing was tagged.",
                                    "--base localhost/envkit-test/absent:none",
                                    "`buildah images`"))  # fmt: skip
    assert "Traceback" not in res.err and not _exists(tag)


def _run_in(image: str, *argv: str) -> str:
    name = f"envkit-test-{uuid.uuid4().hex[:8]}"
    buildah("from", "--pull-never", "--name", name, image)
    try:
        return buildah("run", "--isolation", "chroot", name, "--", *argv).stdout
    finally:
        buildah("rm", name, check=False)
