"""The detector's named errors. The first three are bugs caught before anything is committed."""

from __future__ import annotations


class ChainNotFoundError(RuntimeError):
    """No causal path links two messages the clocks say are causally ordered (a bug)."""


class WitnessError(RuntimeError):
    """A witness crown failed its own check (a bug: the run is not committed)."""


class ComponentMismatchError(RuntimeError):
    """The slab method and the per-component kernel disagree on a component (a bug)."""


class MissingClocksError(ValueError):
    """The distributed crown method was chosen but no clocked events were given to check with."""
