"""Bounded caches: what staging and ``jit`` remember fills up, then forgets the least
recently used entry, so that a loop making fresh jitted functions or calling one with
ever new shapes holds its memory flat (jit's contract)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["LRUCache"]


class LRUCache:
    """At most ``maxsize`` entries; ``get`` refreshes one, ``put`` evicts the oldest.
    Safe to share between threads (a lock guards the table; ``get_or_make`` makes a
    missing value outside it, so no lock is held while user code runs: two threads may
    both make it, the first to finish wins)."""

    __slots__ = ("_entries", "_lock", "maxsize")

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            value = self._entries.get(key, default)
            if key in self._entries:
                self._entries.move_to_end(key)
            return value

    def put(self, key: Hashable, value: Any) -> Any:
        """Keep ``value`` under ``key`` (unless one is there: then that one); returns it."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            self._entries[key] = value
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
            return value

    def get_or_make(self, key: Hashable, make: Callable[[], Any]) -> Any:
        found = self.get(key)
        return found if found is not None else self.put(key, make())

    def __len__(self) -> int:
        return len(self._entries)
