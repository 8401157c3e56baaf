"""Reading a boot log as a stream, in bounded memory, and normalising each line.

The log is read in blocks of :data:`BLOCK` bytes; a line longer than :data:`MAX_LINE` is cut
there and the rest of it skipped as it streams by, so a 100 MB line is never held. A log
whose first block holds NUL bytes or is not text is refused (BadInput); a UTF-16 log (what
PowerShell's ``>`` writes) is read as text.

:func:`candidates` is the fast path: it lowers each block and looks for a few trigger words
(:data:`TRIGGERS`) with ``bytes.find``, and hands on only the lines that hold one, so the
matchers' regexes never see the noise. :func:`every_line` hands on all of them (``--diff``).

:func:`normalise` turns one raw line into what the matchers read: ANSI codes, Docker
Compose prefixes (``vllm-1  | ``), ``docker logs -t`` time stamps, process prefixes
(``(EngineCore_DP0 pid=123)``), vLLM's ``INFO 05-12 10:01:02 [file.py:12]`` header (its level
kept), uvicorn's ``INFO:     `` and carriage-return progress bars are stripped, and secrets
are masked.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from envkit.errors import BadInput
from envkit.io.redaction import mask_secret_shapes
from envkit.wording import counted

BLOCK = 1 << 20
MAX_LINE = 64 * 1024  # vLLM's longest real lines (its list of architectures) are ~16 KB
FIRST_BLOCK = 8192  # where a binary file shows itself
# Every line a matcher reads holds one of these (lower-cased); tests/serving checks that each
# code's sample log is read through them. Few: each costs one bytes.find over every block
# (0.4 to 1.1 GB/s here), so ten keep a log above 50 MB/s.
TRIGGERS = (
    b"error",  # ERROR headers and every *Error: line
    b"exception",
    b"warn",  # WARNING headers, *Warning:, NCCL WARN
    b"version",  # vLLM's version lines
    b"args",  # vLLM's argument dumps
    b"start",  # a healthy start; the spawn guard's "start a new process"
    b"encoder cache",  # the stall point
    b"kv cache size",  # progress past it (not "kv cache": every throughput line has it)
    b"architecture",
    b"transformers_modules",  # a model's own code in a traceback
    b"killed",  # the shell's "Killed": the host's OOM killer
    b"custom code",  # transformers' trust_remote_code prompt
    b" 137",  # exit code 137 (with the space: not every port or id holding 137)
    b"nvcc",  # a JIT build without the compiler ("/bin/sh: 1: nvcc: not found")
    b"get_open_port",  # frames of an internal bind: vLLM's own ports,
    b"tcpstore",  # torch's TCPStore
)
# Read in the log's first HEAD bytes only, where a start prints them once: GPU names
# (nvidia-smi), the command line, variable dumps, the engine's config line.
HEAD = 4 << 20
HEAD_TRIGGERS = (
    b"nvidia",
    b"vllm serve",
    b"vllm_",
    b"hf_",
    b"cuda_",
    b"llm engine",
    b"loading took",
)


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line as the matchers read it: its number in the file (1-based), its level from
    vLLM's or uvicorn's header (``""`` when it has none: tracebacks, other programs), the
    process that printed it when a prefix says, and the text after the prefixes."""

    number: int
    text: str
    level: str = ""
    process: str = ""
    vllm: bool = False  # it carried vLLM's own header or a vLLM process prefix
    cut: bool = False  # the physical line was longer than MAX_LINE and cut as it was read


@dataclass
class ReadStats:
    """What reading saw: filled in while the stream is read."""

    lines: int = 0
    bytes: int = 0
    cut: int = 0  # lines cut at MAX_LINE (those the matchers were handed, or that spanned blocks)


def _blocks(stream: BinaryIO, name: str, stats: ReadStats) -> Iterator[bytes]:
    """The stream in blocks of UTF-8 text; BadInput for an empty or binary first block."""
    first = stream.read(BLOCK)
    if not first:
        raise BadInput(f"The log {name} is empty.", "Give the file vLLM's output went to.")
    stats.bytes += len(first)
    if first.startswith((b"\xff\xfe", b"\xfe\xff")):
        yield from _transcoded(first, stream, stats)
        return
    first = first.removeprefix(b"\xef\xbb\xbf")
    head = first[:FIRST_BLOCK]
    try:
        if b"\x00" in head:
            raise ValueError("NUL")
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except ValueError:  # UnicodeDecodeError included
        raise BadInput(
            f"{name} is not a text log: NUL bytes or invalid text in its first "
            f"{counted(len(head), 'byte')}.",
            "Give the text vLLM printed (docker logs NAME > vllm.log 2>&1).",
        ) from None
    yield first
    while block := stream.read(BLOCK):
        stats.bytes += len(block)
        yield block


def _transcoded(first: bytes, stream: BinaryIO, stats: ReadStats) -> Iterator[bytes]:
    decoder = codecs.getincrementaldecoder("utf-16")(errors="replace")
    block = first
    while block:
        yield decoder.decode(block).encode("utf-8", "replace")
        block = stream.read(BLOCK)
        stats.bytes += len(block)
    yield decoder.decode(b"", final=True).encode("utf-8", "replace")


def _segment(tail: bytes, part: bytes) -> bytes:
    """The last carriage-return segment after ``part`` continues ``tail`` (``b""`` while
    no carriage return was seen), bounded: what a terminal would still show."""
    r = part.rfind(b"\r")
    if r >= 0:
        return b"\r" + part[r + 1 :][:MAX_LINE]
    return (tail + part)[: MAX_LINE + 1] if tail else b""


def _complete(stream: BinaryIO, name: str, stats: ReadStats) -> Iterator[bytes]:
    """Runs of whole lines (each ends with ``\\n``), none longer than 2 x MAX_LINE: a longer
    one keeps its first MAX_LINE bytes and, when carriage returns overwrote it (progress
    bars), its last segment, as a terminal shows it; the rest is skipped without being
    held. The line stays one line (its number true)."""
    carry = head = tail = b""
    skipping = False
    for block in _blocks(stream, name, stats):
        if skipping:
            newline = block.find(b"\n")
            tail = _segment(tail, block if newline < 0 else block[:newline])
            if newline < 0:
                continue
            block = block[newline + 1 :]
            skipping = False
            yield head + tail + b"\n"
        buf = carry + block if carry else block
        end = buf.rfind(b"\n") + 1
        carry = buf[end:]
        whole = buf[:end]
        if len(carry) > MAX_LINE:  # the line goes on: keep its start and its last segment
            head, tail = carry[:MAX_LINE], _segment(b"", carry[MAX_LINE:])
            carry = b""
            skipping = True
            stats.cut += 1
        if whole:
            yield whole
    if skipping:
        yield head + tail + b"\n"
    elif carry:
        yield carry + b"\n"


def _cut(line: bytes, stats: ReadStats) -> bytes:
    if len(line) > 2 * MAX_LINE + 1:
        stats.cut += 1
        return line[:MAX_LINE] + _segment(b"", line[MAX_LINE:])
    return line


def candidates(stream: BinaryIO, name: str, stats: ReadStats) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of each line holding one of :data:`TRIGGERS`."""
    base = 0  # lines before this run
    read = 0
    for run in _complete(stream, name, stats):
        low = run.lower()
        starts: set[int] = set()
        read += len(run)
        for trigger in TRIGGERS + HEAD_TRIGGERS if read <= HEAD else TRIGGERS:
            at = low.find(trigger)
            while at >= 0:
                start = low.rfind(b"\n", 0, at) + 1
                starts.add(start)
                at = low.find(trigger, low.find(b"\n", at))
        counted, number = 0, base
        for start in sorted(starts):
            number += run.count(b"\n", counted, start)
            counted = start
            yield number + 1, _cut(run[start : run.find(b"\n", start)], stats)
        base += run.count(b"\n")
        stats.lines = base


def every_line(stream: BinaryIO, name: str, stats: ReadStats) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of every line."""
    number = 0
    for run in _complete(stream, name, stats):
        for line in run.split(b"\n")[:-1]:
            number += 1
            yield number, _cut(line, stats)
        stats.lines = number


_ANSI = re.compile(r"\x1b\[[0-9;:?<=>]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]")
# Every pattern here is linear on any line (tests/serving/explain/test_linear_patterns.py): no two
# neighbouring quantifiers take the same characters, a run is started once (a lookbehind).
_PROGRESS = re.compile(r"%\|| \d+/\d+ \[|it/s\]|s/it\]")
_COMPOSE = re.compile(r"(?<![\w.-])[A-Za-z0-9][\w.-]*\s+\| ")
_STAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+")
# the name a whole word; the first pid= taken and kept (a lookahead), then to the ")"
_PROCESS = re.compile(
    r"\((?:([A-Za-z][\w-]*)(?![\w-]))?(?=(?P<_p>[^()]*?\bpid=\d))(?P=_p)[^()]*\)\s*"
)
_HEADER = re.compile(
    r"(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\s+"
    r"\[[^\]]*\]\s?"
)
_UVICORN = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def normalise(number: int, raw: bytes) -> list[LogLine]:
    """What the matchers read of one raw line: usually one LogLine; several when carriage
    returns overwrote text that was not a progress bar (each keeps the line's number)."""
    cut = len(raw) >= MAX_LINE
    text = raw.decode("utf-8", "replace")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    parts = [p for p in text.split("\r") if p.strip()] if "\r" in text else [text]
    kept = [p for p in parts[:-1] if not _PROGRESS.search(p)] + parts[-1:]
    return [_strip(number, part, cut) for part in kept]


def _strip(number: int, text: str, cut: bool = False) -> LogLine:
    level = process = ""
    vllm = False
    for _ in range(3):  # the prefixes nest: compose, time stamp, process, header
        before = text
        if m := _COMPOSE.match(text):
            text = text[m.end() :]
        if m := _STAMP.match(text):
            text = text[m.end() :]
        if m := _PROCESS.match(text):
            process = m.group(1) or process
            vllm = True
            text = text[m.end() :]
        if m := _HEADER.match(text):
            vllm = True
        if m := m or _UVICORN.match(text):
            level = {"WARN": "WARNING", "CRITICAL": "ERROR"}.get(m.group(1), m.group(1))
            text = text[m.end() :]
        if text == before:
            break
    text = _CONTROL.sub("", text).rstrip()
    return LogLine(number, mask_secret_shapes(text), level, process, vllm, cut)
