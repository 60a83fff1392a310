"""A package's exports imported on first use (PEP 562), so that importing the package
loads none of its engines."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(
    package: str, where: Mapping[str, str], exported: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`: name -> the attribute of the submodule
    `where[name]` names, imported when first asked for."""

    def getattr_(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{where[name]}"), name)

    def dir_() -> list[str]:
        return sorted(exported)

    return getattr_, dir_
