"""What `fingerprint` and `fleet check` print."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.render.locks import places
from envkit.render.term import echo, emit_json, human_size, one_line, table, wrap
from envkit.wording import agree, counted, every

if TYPE_CHECKING:  # the results' types; importing every core module would slow each command
    from envkit.fleet.fingerprint import Fingerprint
    from envkit.fleet.fleetcheck import FleetResult


def fingerprint(found: Fingerprint, as_json: bool) -> None:
    if as_json:
        emit_json({"ok": True, "fingerprint": found.to_dict()})
        return
    gpus = ", ".join(
        f"{g.name} ({g.capability}, {human_size(g.memory) if g.memory else 'memory n/a'})"
        for g in found.gpus
    )
    modified = [d for d in found.distributions if d.files.value == "modified"]
    rows = [
        ("host", found.host),
        ("platform", found.platform),
        ("environment", f"{found.environment} (Python {found.python})"),
        ("GPUs", gpus or f"none ({found.gpu_problem or 'nvidia-smi lists none'})"),
        ("driver", f"{found.driver} (CUDA {found.driver_cuda or '?'})" if found.driver else "none"),
        ("distributions", f"{len(found.distributions)}, {len(modified)} with changed files"),
        ("Ray", found.ray or "not installed"),
        ("/dev/shm", human_size(found.shm) if found.shm is not None else "none"),
        ("InfiniBand", ", ".join(found.infiniband) or "none"),
        ("variables", ", ".join(f"{k}={v}" for k, v in sorted(found.variables.items())) or "none"),
    ]
    echo(table(rows))
    for dist in modified:
        echo(wrap(f"{dist.name} {dist.version}: changed {', '.join(dist.modified)}", "  ", "    "),
             fg="yellow")  # fmt: skip


def fleet_check(result: FleetResult, as_json: bool) -> None:
    if as_json:
        emit_json(result.to_dict())
        return
    places([result.place])
    venv = f", venv {result.venv}" if result.venv else ""
    count = len(result.verdicts)
    nodes = counted(count, "node")
    echo(one_line(f"{nodes} from {result.source}{venv}:"))
    from envkit.fleet.judge import CHECKS, WORD

    rows = [("NODE", "CELL", *(c.upper() for c in CHECKS))]
    for v in result.verdicts:
        if not v.answered:
            rows.append((v.node, v.cell or "-", "not answering", *("-" for _ in CHECKS[1:])))
            continue
        status = {c.code: WORD[c.severity] for c in v.checks}
        rows.append((v.node, v.cell, *(status.get(c, "-") for c in CHECKS)))
    echo(table(rows))
    bad = [v for v in result.verdicts if v.differs or not v.answered]
    if not bad:
        said = f"{every(count, 'node')} {agree(count, 'matches', 'match')}"
        echo(f"{said} the lock.", fg="green", bold=True)
        return
    differ = agree(len(bad), "differs", "differ")
    echo(f"{len(bad)} of {nodes} {differ} or did not answer:", fg="red", bold=True)
    for v in bad:
        if not v.answered:
            echo(wrap(f"{v.node}: not answering: {v.problem}", "  ", "    "), fg="red")
            continue
        for check in v.checks:
            if check.failed:
                echo(wrap(f"{v.node}: {check.code}: {check.message}", "  ", "    "), fg="red")
                if check.fix:
                    echo(wrap(f"fix: {check.fix}", "    ", "      "))
