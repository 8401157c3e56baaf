"""What a compiled file's link to torch looks like, wherever the file came from: the NEEDED
entries that make a module link torch, and the undefined symbols torch's libraries must define
(its C++ namespaces and its C shims). Used for an installed environment
(:mod:`envkit.gpu.installed.linkage`) and for published wheels before install
(:mod:`envkit.gpu.published.wheelabi`)."""

from __future__ import annotations

import re

TORCH_LIBRARIES = ("libtorch", "libc10")  # NEEDED entries that make a module link torch
# torch's C++ namespaces (c10, at, torch, caffe2) at the start of a mangled name: functions
# and members (_ZN, const _ZNK, ref-qualified _ZNR/_ZNO), vtables and typeinfo (_ZTV, _ZTI,
# _ZTS), thunks (_ZTh, _ZTv), local statics and their guards (_ZZN, _ZGVZN)
TORCH_CXX = re.compile(
    r"_Z(?:T[VIST]|Th[n0-9]+_|Tv[n0-9_]+|GV)?Z?N[rVKRO]*(?:3c10|2at|5torch|6caffe2)"
)
# torch's C symbols: the stable ABI's shims (aoti_torch_*, torch_*) and the Python bindings
TORCH_C = ("aoti_torch_", "torch_", "THP")


def is_torch_symbol(name: str) -> bool:
    """Whether an undefined symbol is one torch's libraries must define."""
    return name.startswith(TORCH_C) or TORCH_CXX.match(name) is not None
