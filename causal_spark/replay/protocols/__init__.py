"""The delivery protocols of the source texts (docs/replay.md).

`spec.py` is the registry of what each protocol is (name, source, flags,
parameters); it loads no engine, so the configuration can read it. Each
protocol's module holds its `SPEC`, its compiled `State`, `make_state` and its
hooks; `registry.py` lists those modules for the loop.
"""
