"""One thread stages a signature; the others wait for it, unless waiting closes a cycle.

``jit`` stages a new signature with no lock held: ``fun`` may call other jitted
functions, which other threads may be staging.  The first thread to meet the signature
claims it (``Claim``); another thread meeting it waits for the claim (``wait_for``)
rather than stage it again, unless that would close a cycle of threads waiting for each
other (mutually recursive jitted functions staged from two threads): then it stages the
signature itself.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["Claim", "wait_for"]


class Claim:
    """A signature being staged by one thread: the others wait for it, unless waiting
    would close a cycle of threads waiting for each other (mutually recursive jitted
    functions staged from two threads): then they stage it themselves."""

    __slots__ = ("done", "entry", "owner")

    def __init__(self) -> None:
        self.owner = threading.get_ident()
        self.done = threading.Event()
        self.entry: Any = None  # tiers.Entry, once staged


# thread -> the thread whose staging it waits for; read and written under _waits_lock only
_waits: dict[int, int] = {}
_waits_lock = threading.Lock()


def wait_for(claim: Claim) -> bool:
    """Wait until ``claim``'s staging ends, unless its thread waits (transitively) for
    this one, or is this one; whether it waited."""
    me = threading.get_ident()
    with _waits_lock:
        other: int | None = claim.owner
        while other is not None:
            if other == me:
                return False
            other = _waits.get(other)
        _waits[me] = claim.owner
    try:
        claim.done.wait()
    finally:
        with _waits_lock:
            del _waits[me]
    return True
