"""``envkit refresh`` and ``envkit knowledge export``: what changed, what a snapshot holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.render.term import echo, emit_json, human_size, note, wrap
from envkit.wording import agree, counted

if TYPE_CHECKING:  # the core is loaded by the command that uses it
    from envkit.gpu.published.refresh import Refreshed
    from envkit.index.snapshot import Snapshot
    from envkit.models.knowledgefill import Exported


def knowledge_in_use(snapshot: Snapshot) -> None:
    """Said once, on stderr, by every command run with --knowledge."""
    note(
        f"{snapshot.age()} ({snapshot.path}, from {snapshot.index}); with it envkit uses no network"
    )


def refreshed(result: Refreshed, as_json: bool) -> None:
    if as_json:
        emit_json({"ok": True, **result.to_dict()})
        return
    if not result.changed:
        echo(
            wrap(
                f"nothing new: the kernel table holds every vLLM release on {result.index} "
                f"({result.releases} listed); {result.out} left as it was",
                "",
                "  ",
            )
        )
    for version in result.new_vllm:
        echo(f"new: vLLM {version} ({result.platform}) in the kernel table", fg="green")
    for build in result.new_torch:
        echo(f"new: torch {build} in the kernel table", fg="green")
    for version in result.no_wheel:
        echo(f"new: vLLM {version} publishes no {result.platform} wheel (kept as a fact)")
    for what in result.cached:
        echo(f"cached: {what}")
    for text in result.notes:
        echo(wrap(f"note: {text}", "", "  "), fg="yellow")
    if result.written:
        echo(
            wrap(
                f"wrote {result.out} ({human_size(result.fetched)} read from {result.index} "
                f"in {result.seconds:.0f} s)",
                "",
                "  ",
            )
        )


def exported_knowledge(result: Exported, as_json: bool) -> None:
    snap = result.snapshot
    if as_json:
        emit_json({"ok": result.complete, **result.to_dict()})
        return
    names = ", ".join(result.profiles) or "no profile"
    echo(wrap(f"wrote {snap.path} ({human_size(result.bytes)}) for {names}", "", "  "))
    kinds = ", ".join(f"{kind} {n}" for kind, n in result.kinds) or "none"
    echo(wrap(f"  {len(snap.pages)} index lists; cache entries: {kinds}", "", "    "))
    echo(wrap(f"  {snap.age()}, from {snap.index}; digest {snap.digest[:16]}", "", "    "))
    for text in result.notes:
        echo(wrap(f"note: {text}", "", "  "))
    for text in result.missing:
        echo(wrap(f"missing: {text}", "", "  "), fg="yellow")
    if result.complete:
        echo(f"ok: use it with envkit --knowledge {snap.path} COMMAND ...", fg="green")
    else:
        echo(
            wrap(
                f"incomplete: {counted(len(result.missing), 'thing')} above "
                f"{agree(len(result.missing), 'is', 'are')} not in it; commands that "
                "need them will say so",
                "",
                "  ",
            ),
            fg="yellow",
        )
