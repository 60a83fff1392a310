"""The Numba disk cache of the replay loop and the protocols' hooks, stamped with all their files.

Numba keys a function's disk cache on its own source file. The loop inlines the
protocols' hooks and the protocols' helpers call the loop's functions, so a
change to one file must recompile what depends on it: `_WingStampedLocator`
stamps each of those functions with every file of the wing (`FILES`). It hooks
into `numba.core.caching.CacheImpl._locator_classes`, an internal of Numba
written against Numba `NUMBA_VERSION` (pinned in pyproject.toml); a test checks
that the installed Numba is that version, so an upgrade comes here first.

Import this module before any module whose functions it stamps defines them
(`structs` does, and every stamped module imports `structs`).
"""

from __future__ import annotations

import os
import zlib
from types import ModuleType
from typing import Any

from numba.core import caching

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # Windows has none: saves there stay unlocked, as in Numba itself
    fcntl = None

# the Numba whose caching internals this module was written against
NUMBA_VERSION = "0.68.1"

_HERE = os.path.dirname(os.path.abspath(__file__))
# the compiled modules that take the loop's StructRefs (besides every protocol module): a
# change to any recompiles all of them
_COMPILED = ("structs.py", "loop.py", "verify.py")


class _WingStampedLocator:
    """Numba's usual cache locator for the loop's and the protocols' functions, stamped with
    all of their files: the loop inlines the protocols' hooks and the protocols' helpers
    call the loop's, so editing any of them recompiles what depends on it. The stamp's hash
    is in the cache files' names too, so an index written by older code (whose pickled
    types may name classes that are gone) is never read."""

    _protocols = os.path.join(_HERE, "protocols")

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @classmethod
    def _files(cls) -> list[str]:
        found = sorted(
            os.path.join(cls._protocols, name)
            for name in os.listdir(cls._protocols)
            if name.endswith(".py")
        )
        return [*(os.path.join(_HERE, name) for name in _COMPILED), *found]

    @classmethod
    def _wing_stamp(cls) -> tuple[tuple[str, float, int], ...]:
        out = []
        for path in cls._files():
            st = os.stat(path)
            out.append((os.path.basename(path), st.st_mtime, st.st_size))
        return tuple(out)

    def get_source_stamp(self) -> Any:
        return (self._inner.get_source_stamp(), self._wing_stamp())

    def get_disambiguator(self) -> str:
        digest = zlib.crc32(repr(self._wing_stamp()).encode())
        return f"{self._inner.get_disambiguator()}-{digest:08x}"

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Any:
        if os.path.abspath(py_file) not in cls._files():
            return None
        for base in _LOCATORS:
            if base is not cls:
                inner = base.from_function(py_func, py_file)
                if inner is not None:
                    return cls(inner)
        return None


_LOCATORS: list[Any] = caching.CacheImpl._locator_classes
if _WingStampedLocator not in _LOCATORS:
    _LOCATORS.insert(0, _WingStampedLocator)


def _locked(save: Any, lock: ModuleType) -> Any:
    """`IndexDataCacheFile.save` under an exclusive lock of its cache folder.

    Numba's save reads a function's index, adds an entry and writes the index back;
    two processes compiling different signatures of one function at once (the
    warm-up's side-by-side protocols, which all add an entry to `run_loop`'s index)
    can lose an entry, or give two entries the same data file. The lock makes the
    read-modify-write one step; loads stay unlocked (the index is replaced
    atomically)."""

    def locked_save(self: Any, key: Any, data: Any) -> Any:
        try:
            folder = os.open(self._cache_path, os.O_RDONLY)
        except OSError:  # no folder yet: Numba creates it on save, unlocked as before
            return save(self, key, data)
        try:
            lock.flock(folder, lock.LOCK_EX)
            return save(self, key, data)
        finally:
            os.close(folder)  # closing releases the lock

    locked_save.__wrapped__ = save  # type: ignore[attr-defined]
    return locked_save


if fcntl is not None and not hasattr(caching.IndexDataCacheFile.save, "__wrapped__"):
    caching.IndexDataCacheFile.save = _locked(  # type: ignore[method-assign]
        caching.IndexDataCacheFile.save, fcntl
    )
