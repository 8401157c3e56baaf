from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# PYTHONDONTWRITEBYTECODE=1 keeps __pycache__ out of the checkout, and would have every
# process of a run compile what it imports again: each worker its test modules (pytest's
# assertion rewriting, 7 of its 10 s of collection), each child Python (an envkit process, a
# venv's interpreter) envkit and its libraries (half its start-up). The bytecode goes to the
# user's cache folder instead, outside the checkout, where Python checks each file against
# its source as it would in __pycache__ (a test never depends on it: only time does).
_PYCACHE = ""
if sys.dont_write_bytecode and not sys.pycache_prefix:
    import platformdirs

    _PYCACHE = str(Path(platformdirs.user_cache_dir("envkit-tests")) / "pycache")
    sys.pycache_prefix = _PYCACHE
    sys.dont_write_bytecode = False

# the fixture modules of a package's tests (tests/gpu/elfbuild.py, tests/serving/bootlogs.py...)
# are imported by the tests in its wings (tests/gpu/binaries/...): their folders are on the path
for _folder in ("gpu", "serving", "compat"):
    sys.path.insert(0, str(Path(__file__).resolve().parent / _folder))

import properties  # noqa: E402

import indexserver  # noqa: E402
import registry_world  # noqa: E402
import wheelhouse  # noqa: E402
from helpers import build_args, envkit, made_once, profile_text  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# one hypothesis profile for the suite, loaded before the test modules build their settings
# (ENVKIT_HYPOTHESIS=thorough: ten times the examples; tests/properties.py)
properties.load()


def _offline(config: pytest.Config) -> bool:
    """Whether this run leaves the package index out (the default; -m network selects it)."""
    selected = str(config.getoption("markexpr"))
    return "not network" in selected or "network" not in selected


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that needs the index and is selected by another of its marks (``-m container``
    picks the network image build too) is skipped, saying so, in a run whose indexes point
    at nothing (see ``_environment``), rather than failing on a refused connection."""
    if _offline(config):
        skip = pytest.mark.skip(reason="needs the package index: select it with -m network")
        for item in items:
            if "network" in item.keywords:
                item.add_marker(skip)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the cores this process may run on (``--maxprocesses``
    caps it at four). Many tests wait part of their time on a child process, a server or a
    clock; a third worker on two cores fills that time (65.6 s against 58.9 s for the offline
    suite on the 2-core machine, docs/benchmarks.md)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1


@pytest.fixture(scope="session", autouse=True)
def hermetic_uv(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[None]:
    """uv with its own cache and no index settings from the developer's environment."""
    saved = dict(os.environ)
    for key in list(os.environ):
        if key.startswith(("UV_", "ENVKIT_", "PIP_")) or key in ("VIRTUAL_ENV", "PYTHONPATH"):
            del os.environ[key]
    os.environ["UV_CACHE_DIR"] = str(tmp_path_factory.mktemp("uv-cache"))
    os.environ["UV_PYTHON_DOWNLOADS"] = "never"
    os.environ["ENVKIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("envkit-cache"))
    # the user's own profile folder (platformdirs) is not the developer's
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("user-data"))
    os.environ["UV_NO_PROGRESS"] = "1"
    # one text width for every run, whatever the developer's terminal (the text view folds
    # to it); tests of folding set their own
    os.environ["COLUMNS"] = "100"
    os.environ["UV_HTTP_RETRIES"] = "0"  # a dead index fails at once
    # a bug shows its traceback, which the tests look for (cli._internal_error)
    os.environ["ENVKIT_TRACEBACK"] = "1"
    if _PYCACHE:  # the children too (see _PYCACHE)
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = _PYCACHE
    if _offline(pytestconfig):
        # the offline suite: an index lookup nobody pointed at a local index fails at once,
        # here and on a machine that reaches the real one (network tests use the real one)
        os.environ["UV_DEFAULT_INDEX"] = "http://127.0.0.1:9/simple"
        os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
    yield
    os.environ.clear()
    os.environ.update(saved)


@dataclass(frozen=True)
class Indexes:
    default: str  # vllm, transformers 4.51.3 + 5.0.0, torch 2.6.0 built for CUDA 12.4
    cpu: str  # the same with a CPU-only torch
    mirror: str  # a PyTorch-index mirror: torch 2.6.0+cu124


@pytest.fixture(scope="session")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> Indexes:
    """Made once a run (helpers.made_once) and only read: a test that changes an index copies
    it first."""

    def make(root: Path) -> None:
        wheelhouse.write_index(
            root / "cpu",
            [
                wheelhouse.vllm(),
                wheelhouse.transformers("4.51.3", with_attribute=True),
                wheelhouse.torch("2.6.0", cuda=None),
            ],
        )
        wheelhouse.standard_index(root / "default")
        wheelhouse.mirror_index(root / "mirror")

    root = made_once(tmp_path_factory, "indexes", make)
    # write_index's URL: the index's simple/ folder
    return Indexes(*((root / name / "simple").as_uri() for name in ("default", "cpu", "mirror")))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder with envs/ holding the test profiles."""
    envs = tmp_path / "envs"
    envs.mkdir()
    (envs / "good.toml").write_text(profile_text())
    (envs / "unpinned.toml").write_text(profile_text(constraints=()))
    return tmp_path


@contextmanager
def _published(
    factory: pytest.TempPathFactory,
    name: str,
    wheels: Callable[[], list[wheelhouse.Wheel]],
    upload_times: Callable[[Path], dict[str, str]],
) -> Iterator[indexserver.Server]:
    """``wheels`` written once a run into a folder every worker reads (helpers.made_once),
    served by a server of this process's own (a test sets its status, reads its paths)."""

    def write(folder: Path) -> None:
        for wheel in wheels():
            wheel.write(folder)

    folder = made_once(factory, name, write)
    with indexserver.serve(folder) as server:
        server.upload_times = upload_times(folder)
        yield server


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A local index on 127.0.0.1 publishing registry_world's wheels, with range requests."""
    with _published(
        tmp_path_factory, "world", registry_world.wheels, registry_world.upload_times
    ) as server:
        yield server


@pytest.fixture
def scan_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh scan cache for one test (ENVKIT_CACHE_DIR)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(cache))
    return cache


@pytest.fixture(scope="session")
def _built(tmp_path_factory: pytest.TempPathFactory, indexes: Indexes) -> Path:
    """p/, a project with envs/good.toml built into .venv once a run (helpers.made_once: one
    build for every worker), and build.json, what that ``envkit build good --json`` printed."""

    def make(root: Path) -> None:
        project = root / "p"
        (project / "envs").mkdir(parents=True)
        (project / "envs" / "good.toml").write_text(profile_text())
        res = envkit("build", "good", "--json", *build_args(indexes.default), cwd=project)
        (root / "build.json").write_text(res.assert_ok().out)

    return made_once(tmp_path_factory, "built", make)


@pytest.fixture(scope="session")
def built_template(_built: Path) -> Path:
    """A project with envs/good.toml built into .venv once a run; copy before use."""
    return _built / "p"


@pytest.fixture(scope="session")
def built_report(_built: Path) -> dict[str, Any]:
    """What the build of ``built_template`` printed with --json (its paths are the
    template's)."""
    data: dict[str, Any] = json.loads((_built / "build.json").read_text())
    return data


@pytest.fixture
def built_copy(built_template: Path, tmp_path: Path) -> Path:
    """A private copy of the built project (the venv is relocatable, so copies work)."""
    copy = tmp_path / "p"
    shutil.copytree(built_template, copy, symlinks=True)
    return copy


@pytest.fixture(scope="session")
def lint_world_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[indexserver.Server]:
    """A local index publishing lint_world's tiny vLLM wheels (their serve parsers)."""
    import lint_world

    def write(folder: Path) -> None:
        for wheel in lint_world.wheels():
            wheel.write(folder)

    with indexserver.serve(made_once(tmp_path_factory, "lint-world", write)) as served:
        yield served


@pytest.fixture(scope="session")
def compat_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A local index publishing compat_world's wheels (vLLM and three transformers)."""
    import compat_world as cw

    with _published(tmp_path_factory, "compat-world", cw.wheels, cw.upload_times) as server:
        yield server


@pytest.fixture(scope="session")
def runtime_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A local index publishing runtime_world's wheels (one vLLM and three transformers)."""
    import runtime_world as rw

    with _published(tmp_path_factory, "runtime-world", rw.wheels, rw.upload_times) as server:
        yield server


@pytest.fixture(scope="session")
def startup_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A local index publishing startup_world's wheels (two vLLM and five transformers)."""
    import startup_world as sw

    with _published(tmp_path_factory, "startup-world", sw.wheels, sw.upload_times) as server:
        yield server


@pytest.fixture(scope="session")
def upgrade_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A local index publishing upgrade_world's wheels (three vLLM, two transformers, two torch
    and two tokenizers releases)."""
    import upgrade_world as uw

    with _published(tmp_path_factory, "upgrade-world", uw.wheels, uw.upload_times) as server:
        yield server


# ENVKIT_TEST_CPU=FOLDER: each test's CPU seconds (this process and the children it waited
# for: the uv runs, the envkit processes) and wall seconds, setup and teardown included, one
# JSON line per test in FOLDER/<worker>.jsonl (benchmarks/suite_time.py --per-test reads them).
# The first test to use a session fixture pays for building it; one made once a run
# (helpers.made_once) is paid for by the run's first, and another worker's test waiting
# for it is charged the wait as wall time.
_CPU_FOLDER = os.environ.get("ENVKIT_TEST_CPU", "")
if _CPU_FOLDER:
    import json as _json

    from forked import forked_cpu

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        before, forked = os.times(), forked_cpu()
        yield
        after = os.times()
        spent = [b - a for a, b in zip(before, after, strict=True)]
        spent[2] += forked_cpu() - forked  # the envkit processes forked by the zygote
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        line = {
            "test": item.nodeid,
            "cpu": round(spent[0] + spent[1], 3),
            "children": round(spent[2] + spent[3], 3),
            "wall": round(spent[4], 3),
        }
        with open(Path(_CPU_FOLDER) / f"{worker}.jsonl", "a") as sink:
            sink.write(_json.dumps(line) + "\n")
