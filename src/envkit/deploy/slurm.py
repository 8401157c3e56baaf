"""Slurm: an ``sbatch`` script.

One node: ``vllm serve`` on the job's node. Several: the start vLLM's multi-node guide
describes, on Ray: ``ray start --head`` on the job's first node, ``ray start --address``
on each other one (one ``srun`` step per node, in the background), a wait until every
node has joined, then ``vllm serve``
with tensor parallelism across each node's GPUs and pipeline parallelism across the nodes.

It runs the image through Apptainer (``apptainer exec --nv docker://REF@sha256:...``), or
the venv envkit built from the cell (``--venv``, on a file system every node sees). Every
word is quoted for the shell (:func:`envkit.io.escaping.shell_command`); values come
before encoding, never after.
"""

from __future__ import annotations

from pathlib import Path

from envkit.deploy.facts import Facts, comment, ray_wait
from envkit.io import escaping
from envkit.io.redaction import redact

RAY_PORT = 6379


def shell_command(words: list[str]) -> str:
    """Each word redacted (a credential masked in the value), then quoted for the shell."""
    return escaping.shell_command([redact(w) for w in words])


def _runner(facts: Facts, venv: Path | None) -> list[str]:
    if facts.image is not None:
        reference = "docker://" + facts.image.reference
        return [f"RUN=({shell_command(['apptainer', 'exec', '--nv', reference])})"]
    assert venv is not None
    bin_dir = str(venv / "bin")
    return [
        "RUN=()",
        f'export PATH={shell_command([bin_dir])}:"$PATH"',
        f"export VIRTUAL_ENV={shell_command([str(venv)])}",
    ]


def script(facts: Facts, venv: Path | None) -> str:
    directives = [
        f"#SBATCH --job-name={facts.name}",
        f"#SBATCH --nodes={facts.nodes}",
        "#SBATCH --ntasks-per-node=1",
    ]
    if facts.spec.cuda:
        directives.append(f"#SBATCH --gpus-per-node={facts.gpus_per_node}")
    lines = ["#!/bin/bash", *directives, comment(facts.comment_lines()).rstrip("\n"), ""]
    lines += ["set -euo pipefail", *_runner(facts, venv)]
    lines += [f"export {k}={shell_command([v])}" for k, v in facts.env]
    serve = shell_command(["vllm", "serve", facts.served, *facts.serve_args()])
    if facts.nodes == 1:
        lines.append(f'exec "${{RUN[@]}}" {serve}')
        return "\n".join(lines) + "\n"
    lines += [
        'mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        'head_node="${nodes[0]}"',
        'head_ip="$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address'
        " | awk '{print $1}')\"",
        f'srun --nodes=1 --ntasks=1 -w "$head_node" "${{RUN[@]}}" ray start --head'
        f' --node-ip-address="$head_ip" --port={RAY_PORT} --block &',
        "sleep 10",
        'for node in "${nodes[@]:1}"; do',
        f'  srun --nodes=1 --ntasks=1 -w "$node" "${{RUN[@]}}" ray start'
        f' --address="$head_ip:{RAY_PORT}" --block &',
        "done",
        f'srun --overlap --nodes=1 --ntasks=1 -w "$head_node" "${{RUN[@]}}" '
        f"{shell_command(ray_wait(facts.nodes))}",
        f'srun --overlap --nodes=1 --ntasks=1 -w "$head_node" "${{RUN[@]}}" {serve}',
    ]
    return "\n".join(lines) + "\n"
