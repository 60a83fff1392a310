"""What to replay (`ReplayRequest`): protocol names, receive mode, parameters, checked once
against the protocol registry (`protocols.spec`). No Spark, no Numba."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from causal_spark.replay.protocols.spec import SPECS

NONSELECTIVE = "nonselective"
SELECTIVE = "selective"
RECEIVE_MODES: tuple[str, ...] = (NONSELECTIVE, SELECTIVE)


class ReplayRequestError(ValueError):
    """The protocols, receive mode or parameters asked for are not valid."""


@dataclass(frozen=True)
class ReplayRequest:
    """What to replay: protocol names, the receive mode, per-protocol parameters."""

    protocols: tuple[str, ...]
    receive_mode: str = NONSELECTIVE
    params: Mapping[str, Mapping[str, str]] | None = None
    default_latency: float = 1.0
    # a (trace, protocol) whose estimated peak memory exceeds this is not replayed
    # (`not_applicable`, with the estimate); None: no limit (docs/replay.md)
    max_run_bytes: int | None = None

    def validate(self) -> ReplayRequest:
        if not self.protocols:
            raise ReplayRequestError("no protocol to replay")
        for name in self.protocols:
            if name not in SPECS:
                raise ReplayRequestError(f"unknown protocol '{name}'; known: {', '.join(SPECS)}")
        if self.receive_mode not in RECEIVE_MODES:
            raise ReplayRequestError(
                f"receive mode must be one of {RECEIVE_MODES}, found '{self.receive_mode}'"
            )
        for name, given in (self.params or {}).items():
            if name not in SPECS:
                raise ReplayRequestError(f"parameter for unknown protocol '{name}'")
            unknown = sorted(set(given) - set(SPECS[name].params))
            if unknown:
                raise ReplayRequestError(
                    f"protocol '{name}' has no parameter(s) {unknown}; "
                    f"it takes {sorted(SPECS[name].params) or 'none'}"
                )
        if not self.default_latency > 0:
            raise ReplayRequestError(
                f"default latency must be positive, found {self.default_latency}"
            )
        if self.max_run_bytes is not None and self.max_run_bytes <= 0:
            raise ReplayRequestError(f"max_run_bytes must be positive, found {self.max_run_bytes}")
        return self

    def params_of(self, name: str) -> Mapping[str, str]:
        return (self.params or {}).get(name, {})


def parse_params(items: Sequence[str]) -> dict[str, dict[str, str]]:
    """`protocol.key=value` items (the CLI's --param) as {protocol: {key: value}}."""
    out: dict[str, dict[str, str]] = {}
    for item in items:
        name, sep, value = item.partition("=")
        proto, dot, key = name.partition(".")
        if not sep or not dot or not proto or not key:
            raise ReplayRequestError(f"--param '{item}' must look like protocol.key=value")
        out.setdefault(proto.strip(), {})[key.strip()] = value.strip()
    return out
