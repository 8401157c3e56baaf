"""What /proc says: processes by pid and start time, who holds a listening socket."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from envkit.io import procfs

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_a_listening_socket_is_found_with_its_holder() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        assert procfs.listening(port) == set()  # bound, not listening yet
        sock.listen()
        inodes = procfs.listening(port)
        assert len(inodes) == 1
        assert list(procfs.holders(inodes, [os.getpid()])) == [os.getpid()]
        assert os.getpid() in set(procfs.holders(inodes))
        assert procfs.name(os.getpid())  # this process's name
    assert procfs.listening(port) == set()


def test_processes_their_start_and_descendants() -> None:
    me = procfs.stat(os.getpid())
    assert me is not None and me.alive and me.ppid == os.getppid()
    with subprocess.Popen(["sleep", "30"]) as child:
        try:
            table = procfs.processes()
            assert table[child.pid].ppid == os.getpid()
            assert table[child.pid].start >= me.start
            assert child.pid in procfs.descendants([os.getpid()], table)
        finally:
            child.kill()
    assert procfs.stat(2**22 + 1) is None  # no such pid
