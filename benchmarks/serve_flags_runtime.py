"""`envkit lint`'s knowledge held to run time: the flags `releases.serveflags` reads from a vLLM
wheel (never installed) against the argument parser the installed release builds.

For each release: a venv holding it (made by hand, e.g. `uv venv /tmp/v085 --python 3.12` and
`uv pip install --python /tmp/v085/bin/python vllm==0.8.5`), whose interpreter builds
`vllm serve`'s parser as `vllm serve` does (`make_arg_parser` on a FlexibleArgumentParser
subparser) and lists every option string with its nargs; and the release's wheel (a file on
disk; envkit lint reads the same members by range from the index), read by envkit. Without a
GPU (or libcuda) here, the child sets vLLM's platform to its CPU platform before building the
parser (vLLM 0.33's config defaults need a device type); neither the CPU nor the CUDA platform
adds flags (only ROCm's overrides pre_register_and_update). Agreement counts option strings
both have, misses the ones
only run time has (lint would call them unknown), extras the ones only envkit has (lint would
pass a flag vLLM refuses); arity agreement compares nargs where envkit knows it. The VLLM_*
names are compared with `vllm.envs.environment_variables` the same way.

    python benchmarks/serve_flags_runtime.py --venv /tmp/v085 --wheel /tmp/w/vllm-0.8.5-....whl
        [--venv /tmp/v033 --wheel ...] [--out benchmarks/results/serve_flags_runtime.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from machine import describe  # benchmarks/machine.py, beside this script

from envkit.releases.serveflags import read_release, wanted_members

CHILD = r"""
import argparse, json, sys
sys.argv = ["vllm", "serve"]
import vllm, vllm.envs as envs
import vllm.platforms as platforms
try:  # no GPU (nor libcuda) here: the CPU platform, so the config classes can be built
    from vllm.platforms.cpu import CpuPlatform
    platforms._current_platform = CpuPlatform()
except Exception as exc:
    print("platform left as detected:", exc, file=sys.stderr)
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
except ImportError:
    from vllm.entrypoints.common.cli_args import make_arg_parser
from vllm.entrypoints.cli.serve import ServeSubcommand
top = FlexibleArgumentParser(prog="vllm")
subs = top.add_subparsers()
parser = ServeSubcommand().subparser_init(subs)
flags = {}
positional = False
for action in parser._actions:
    if not action.option_strings:
        positional = positional or action.dest == "model_tag"
        continue
    if action.nargs == 0:
        nargs = "0"
    elif action.nargs is None:
        nargs = "1"
    else:
        nargs = str(action.nargs)
    for option in action.option_strings:
        flags[option] = nargs
for option in parser._option_string_actions:  # hidden strings still parse
    flags.setdefault(option, "0" if parser._option_string_actions[option].nargs == 0 else "1")
parsed = {}
for probe in (["--enable-reasoning"], ["--disable-log-requests"], ["--max-model-len", "4096"]):
    try:
        parser.parse_known_args(["m", *probe])  # unknown flags come back, not raised
        parsed[probe[0]] = probe[0] not in parser.parse_known_args(["m", *probe])[1]
    except SystemExit:
        parsed[probe[0]] = False
print(json.dumps({"version": vllm.__version__, "flags": flags, "positional": positional,
                  "variables": sorted(envs.environment_variables), "parsed": parsed}))
"""


def runtime(venv: Path) -> dict:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", CHILD],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{venv}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def from_wheel(wheel: Path, version: str) -> tuple[dict, float, int]:
    start = time.perf_counter()
    with zipfile.ZipFile(wheel) as archive:
        members = {i.filename: i for i in archive.infolist()}
        names = wanted_members(members)
        texts = {n: archive.read(n).decode("utf-8", "replace") for n in names}
        packed = sum(members[n].compress_size for n in names)
    found = read_release(version, texts)
    return found.to_dict(), time.perf_counter() - start, packed


def compare(venv: Path, wheel: Path) -> dict:
    truth = runtime(venv)
    read, seconds, packed = from_wheel(wheel, truth["version"])
    if read["unreadable"]:
        return {"version": truth["version"], "unreadable": read["unreadable"]}
    ours, theirs = read["flags"], truth["flags"]
    both = sorted(set(ours) & set(theirs))
    known = [f for f in both if ours[f]]
    arity_same = [f for f in known if ours[f] == theirs[f]]
    variables = set(read["variables"]), set(truth["variables"])
    return {
        "version": truth["version"],
        "runtime_flags": len(theirs),
        "wheel_flags": len(ours),
        "agree": len(both),
        "misses": sorted(set(theirs) - set(ours)),
        "extras": sorted(set(ours) - set(theirs)),
        "arity_known": len(known),
        "arity_agree": len(arity_same),
        "arity_disagree": {f: [ours[f], theirs[f]] for f in known if ours[f] != theirs[f]},
        "positional_model": [read["positional_model"], truth["positional"]],
        "variables": {
            "runtime": len(variables[1]),
            "agree": len(variables[0] & variables[1]),
            "misses": sorted(variables[1] - variables[0]),
            "extras": sorted(variables[0] - variables[1]),
        },
        "read_seconds": round(seconds, 2),
        "compressed_bytes_read": packed,
        "wheel_bytes": wheel.stat().st_size,
        # [envkit reads it from the wheel, the parser lists it, the parser accepts it]
        "probes": {f: [f in ours, f in theirs, ok] for f, ok in truth["parsed"].items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", action="append", type=Path, required=True)
    parser.add_argument("--wheel", action="append", type=Path, required=True)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if len(args.venv) != len(args.wheel):
        parser.error("give one --wheel per --venv")
    results = [compare(v, w) for v, w in zip(args.venv, args.wheel, strict=True)]
    report = {"machine": describe(), "releases": results}
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
