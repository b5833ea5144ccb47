"""The admin child's replies are read from a descriptor of any number."""

from __future__ import annotations

import os
import resource

import pytest

from sparkmirror import adminproc


def test_a_reply_on_a_descriptor_above_1023_is_read_and_a_silent_one_times_out():
    """select() refuses descriptors above 1023; a monitor of many flows, each with its Kafka clients'
    sockets, has such descriptors for its admin children's pipes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the hard limit of open files is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    r, w = os.pipe()
    high = 1100
    try:
        os.dup2(r, high)
        with pytest.raises(TimeoutError):
            adminproc._read_exactly(high, 3, adminproc.time.monotonic() + 0.2)
        os.write(w, b"abc")
        assert adminproc._read_exactly(high, 3, adminproc.time.monotonic() + 5) == b"abc"
    finally:
        for fd in (r, w, high):
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
