"""A protocol's parameters (`--param name.key=value`, `replay.params`) and their parsing."""

from __future__ import annotations

from dataclasses import dataclass


class ProtocolParamError(ValueError):
    """A protocol parameter (`--param name.key=value`) is unknown or has a bad value."""


@dataclass(frozen=True)
class Param:
    """A parameter that keeps its text (None when absent)."""

    description: str

    def parse(self, where: str, text: str | None) -> object:
        return text


@dataclass(frozen=True)
class TextParam(Param):
    """A name, kept as given (None when absent)."""


@dataclass(frozen=True)
class IntParam(Param):
    """An integer of at least `least` (None when absent: the protocol picks its default)."""

    least: int | None = None

    def parse(self, where: str, text: str | None) -> int | None:
        if text is None:
            return None
        try:
            value = int(text)
        except ValueError as e:
            raise ProtocolParamError(f"{where} must be an integer, found '{text}'") from e
        if self.least is not None and value < self.least:
            raise ProtocolParamError(f"{where} must be at least {self.least}, found {value}")
        return value


@dataclass(frozen=True)
class BoolParam(Param):
    """true/false (also 1/0, yes/no), or `default` when absent."""

    default: bool = False

    def parse(self, where: str, text: str | None) -> bool:
        if text is None:
            return self.default
        lowered = text.strip().lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise ProtocolParamError(f"{where} must be true or false, found '{text}'")
