"""Inputs and outputs: discovery, readers of every format, the Delta sink, the `runs` ledger."""
