"""The package's shape (HOUSE.md, rules of the house), read from the source with `ast`.

- no import circle among `causal_spark`'s modules;
- no upward import: kernels and foundations < engines < stages < app;
- no module over 700 lines;
- the product imports nothing from `tests/`.

Every `import` in a module counts, wherever it is (inside a function, under
`TYPE_CHECKING`): an import hidden in a function still closes a circle. An
import names the most specific module it loads (`from causal_spark.clocks
import kernel` is an edge to `causal_spark.clocks.kernel`; `from
causal_spark.clocks import with_clocks` one to the package `causal_spark.clocks`).

Offences of other wings that are being fixed on their branches are listed in
KNOWN with who fixes them: while some remain, the test is an expected failure
that names them; once one is gone, the test fails until it is taken off the list.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "causal_spark"
MAX_LINES = 700

# floors: a module may import its own floor and lower ones only. Kernels are the modules
# named kernel or *_kernel; foundations the few every floor uses.
KERNEL, ENGINE, STAGES, APP = 0, 1, 2, 3
FLOOR_NAMES = {KERNEL: "kernels and foundations", ENGINE: "engines", STAGES: "stages", APP: "app"}
FOUNDATIONS = {
    PACKAGE,
    f"{PACKAGE}.columns",
    f"{PACKAGE}.tables",
    f"{PACKAGE}.config",
    f"{PACKAGE}._arrow",
    f"{PACKAGE}._spark",
    f"{PACKAGE}._lazy",
    # the protocol registry: plain data (no Spark, no Numba, no engine) that the
    # configuration validates protocol names against
    f"{PACKAGE}.replay.protocols.spec",
    f"{PACKAGE}.replay.protocols.params",
}
# the command line and the console script that runs it
APP_MODULES = {f"{PACKAGE}.app", f"{PACKAGE}.app.cli", f"{PACKAGE}.app.console"}

CIRCLES, UPWARD, OVERSIZED = "circles", "upward imports", "modules over 700 lines"
# offence -> who fixes it, on which branch (none left: the replay wing was the last)
KNOWN: dict[str, dict[str, str]] = {CIRCLES: {}, UPWARD: {}, OVERSIZED: {}}


def modules(root: Path, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted name -> file of every module of `package` under `root` (a package is its
    `__init__`)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """The modules (of `known`, or outside them: any `tests` module) that module `name`
    imports anywhere in its source."""
    known = set(known)
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rsplit(".", 1)[0]
    found: set[str] = set()

    def add(target: str) -> None:
        if target in known or target == "tests" or target.startswith("tests."):
            found.add(target)

    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(here.split(".")[: len(here.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                add(submodule if submodule in known else base)
    found.discard(name)
    return found


def import_graph(root: Path, package: str = PACKAGE) -> dict[str, set[str]]:
    mods = modules(root, package)
    return {name: imports_of(name, path, mods) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as a
    shortest cycle through its smallest module, that module first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:
        # iterative Tarjan: the graph is small, but recursion depth is not ours to pick
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.add(w)
                        if w == node:
                            break
                    components.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for component in components:
        if len(component) < 2:
            continue
        start = min(component)
        # breadth-first search inside the component for the shortest way back to start
        parent: dict[str, str] = {}
        frontier = [start]
        back = None
        while frontier and back is None:
            following = []
            for u in frontier:
                for w in sorted(graph[u] & component):
                    if w == start:
                        back = u
                        break
                    if w not in parent:
                        parent[w] = u
                        following.append(w)
                if back is not None:
                    break
            frontier = following
        assert back is not None  # a strongly connected component has a cycle through start
        path = [back]
        while path[-1] != start:
            path.append(parent[path[-1]])
        out.append(path[::-1])
    return sorted(out)


def floor(name: str) -> int:
    if name in APP_MODULES:
        return APP
    if name.startswith(f"{PACKAGE}.app."):
        return STAGES
    last = name.rsplit(".", 1)[-1]
    # a package's errors module holds exception classes only: kernels may raise them
    if name in FOUNDATIONS or last in ("kernel", "errors") or last.endswith("_kernel"):
        return KERNEL
    return ENGINE


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        for target in targets
        if target in graph and floor(target) > floor(name)
    )


def kernels_importing_spark(root: Path, package: str = PACKAGE) -> list[str]:
    """Kernels know no Spark: no `pyspark` import in a module named *kernel."""
    out = []
    for name, path in modules(root, package).items():
        if floor(name) != KERNEL or name in FOUNDATIONS:
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == "pyspark" or n.startswith("pyspark.") for n in names):
                out.append(name)
                break
    return out


def oversized(root: Path, package: str = PACKAGE) -> list[str]:
    return sorted(
        name
        for name, path in modules(root, package).items()
        if len(path.read_text("utf-8").splitlines()) > MAX_LINES
    )


def check(offences: list[str], what: str) -> None:
    """Fail on offences not in KNOWN[what], and on KNOWN[what] entries that are gone; an
    expected failure while known ones remain."""
    known = KNOWN[what]
    new = [o for o in offences if o not in known]
    fixed = [k for k in known if k not in offences]
    assert not new, f"{what}: {new}"
    assert not fixed, f"{what}: fixed, take them off KNOWN in {Path(__file__).name}: {fixed}"
    if offences:
        pytest.xfail(f"{what} of other wings: " + "; ".join(f"{o} ({known[o]})" for o in offences))


def _circle_names(found: list[list[str]]) -> list[str]:
    return [" -> ".join(c) for c in found]


# ---------------------------------------------------------------------------------------------
# the package as it is


def test_no_import_circles() -> None:
    check(_circle_names(cycles(import_graph(ROOT))), CIRCLES)


def test_no_upward_imports() -> None:
    check(upward_imports(import_graph(ROOT)), UPWARD)


def test_no_module_over_700_lines() -> None:
    check(oversized(ROOT), OVERSIZED)


def test_kernels_import_no_spark() -> None:
    kernels = [n for n in modules(ROOT) if floor(n) == KERNEL and n not in FOUNDATIONS]
    assert len(kernels) >= 5, kernels  # the clocks' and the detector's kernels were found
    assert kernels_importing_spark(ROOT) == []


def test_the_product_imports_nothing_from_tests() -> None:
    graph = import_graph(ROOT)
    assert len(graph) > 30  # the walk found the package
    assert (
        sorted(f"{n} -> {t}" for n, ts in graph.items() for t in ts if t.startswith("tests")) == []
    )


def test_every_import_of_a_moved_module_is_gone() -> None:
    """The modules the clocks, anomalies and replay packages replaced are not imported anywhere."""
    gone = [
        "anomaly_kernel",
        "clock_kernel",
        "crowns_distributed",
        "explain",
        "graphs",
        "matrix",
        "order",
        "plots",
        "protocols",
        "replay_engine",
        "replay_layout",
        "replay_loop",
        "replay_shape",
        "replay_size",
    ]
    mods = modules(ROOT)
    for name in gone:
        assert f"{PACKAGE}.{name}" not in mods
    stale = []
    for folder in ("causal_spark", "tests", "bench", "jobs"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                named = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [f"{node.module}.{a.name}" for a in node.names] + [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                stale += [
                    f"{path.relative_to(ROOT)}: {n}"
                    for n in named
                    if any(n == f"{PACKAGE}.{g}" or n.startswith(f"{PACKAGE}.{g}.") for g in gone)
                ]
    assert stale == []


# ---------------------------------------------------------------------------------------------
# the checks find what they look for


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_walk_finds_a_planted_circle_an_upward_import_and_a_long_module(
    tmp_path: Path,
) -> None:
    _write(
        tmp_path,
        {
            "causal_spark/__init__.py": "",
            "causal_spark/config.py": "from causal_spark.clocks import with_clocks\n",
            "causal_spark/clocks/__init__.py": "from causal_spark.clocks.engine import with_clocks\n",
            "causal_spark/clocks/engine.py": (
                "from causal_spark.clocks import kernel\n"
                "def f():\n    from causal_spark.anomalies import crowns\n"
            ),
            "causal_spark/clocks/kernel.py": "import pyspark.sql\n",
            "causal_spark/anomalies/__init__.py": "",
            "causal_spark/anomalies/crowns.py": (
                "from ..clocks.engine import with_clocks\nfrom tests.helpers import x\n"
            ),
            "causal_spark/app/__init__.py": "",
            "causal_spark/app/cli.py": "from causal_spark.app import stages\n",
            "causal_spark/app/stages.py": "from . import cli\n" + "x = 1\n" * MAX_LINES,
        },
    )
    graph = import_graph(tmp_path)
    assert graph["causal_spark.clocks.engine"] == {
        "causal_spark.clocks.kernel",
        "causal_spark.anomalies.crowns",
    }
    assert graph["causal_spark.anomalies.crowns"] == {"causal_spark.clocks.engine", "tests.helpers"}
    assert _circle_names(cycles(graph)) == [
        "causal_spark.anomalies.crowns -> causal_spark.clocks.engine",
        "causal_spark.app.cli -> causal_spark.app.stages",
    ]
    assert upward_imports(graph) == [
        "causal_spark.app.stages -> causal_spark.app.cli",
        "causal_spark.config -> causal_spark.clocks",
    ]
    assert oversized(tmp_path) == ["causal_spark.app.stages"]
    assert kernels_importing_spark(tmp_path) == ["causal_spark.clocks.kernel"]


# ---- citations: what the product names must ship with it -----------------------------------

# the contract and the source texts live outside the repository: cite the docs page that
# writes the definition out, or the paper by its authors (docs/replay.md lists the texts)
UNSHIPPED = re.compile(r"DESIGN §|\bDESIGN\b|seed \d\d\d|seeds/|HOUSE\.md|STYLE\.md")
DOCS_PAGE = re.compile(r"\bdocs/[\w-]+\.md\b")


def _shipped_texts(root: Path = ROOT) -> Iterable[Path]:
    for pattern in (
        "causal_spark/**/*.py",
        "jobs/*.py",
        "bench/*.py",
        "conf/*.yml",
        "schemas/*.json",
    ):
        yield from sorted(root.glob(pattern))


def unshipped_citations(root: Path = ROOT) -> list[str]:
    """`path:line` of every mention of a document the project does not ship."""
    found = []
    for path in _shipped_texts(root):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if UNSHIPPED.search(line) or any(
                not (root / page).is_file() for page in DOCS_PAGE.findall(line)
            ):
                found.append(f"{path.relative_to(root)}:{number}")
    return found


def test_the_product_cites_only_what_ships_with_it() -> None:
    assert unshipped_citations() == []


def test_the_citation_check_finds_what_it_forbids(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "clocks.md").write_text("# clocks\n")
    _write(
        tmp_path,
        {
            "causal_spark/a.py": '"""Clocks (docs/clocks.md)."""\n',
            "causal_spark/b.py": '"""Crowns (seed 000 §4.2)."""\nx = 1  # DESIGN §3\n',
            "causal_spark/c.py": '"""Replay (docs/replay.md)."""\n',
        },
    )
    assert unshipped_citations(tmp_path) == [
        "causal_spark/b.py:1",
        "causal_spark/b.py:2",
        "causal_spark/c.py:1",
    ]


def test_every_package_and_template_ships_in_the_wheel() -> None:
    """pyproject lists packages by hand: a new package or template kind must be added there
    (a cluster runs the wheel, where an unlisted one is missing; an editable install hides it)."""
    import fnmatch
    import tomllib

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / PACKAGE).rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert on_disk <= set(setuptools["packages"]), on_disk - set(setuptools["packages"])
    patterns = setuptools["package-data"][f"{PACKAGE}.report"]
    templates = (ROOT / PACKAGE / "report" / "templates").iterdir()
    unshipped = [
        t.name
        for t in templates
        if not any(fnmatch.fnmatch(f"templates/{t.name}", p) for p in patterns)
    ]
    assert unshipped == []


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "bench").glob("*.py")))
def test_every_benchmark_imports(script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # a benchmark is run by hand, rarely: an import of a name the product no longer has
    # (bench/baselines.py imported a removed `KIND_ALIASES`) must fail here, not then
    import importlib.util
    import sys

    monkeypatch.syspath_prepend(str(ROOT / "bench"))  # bench/ is not a package
    spec = importlib.util.spec_from_file_location(f"bench_{script[:-3]}", ROOT / "bench" / script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)  # each runs only under `__main__`


def test_the_configuration_loads_no_engine() -> None:
    """Reading the configuration (protocol names included) loads neither Numba nor Spark: the
    protocol registry it reads (`replay.protocols.spec`) is plain data."""
    import subprocess
    import sys

    probe = (
        "import sys; from causal_spark.config import load_config; load_config(); "
        "print(sorted(m for m in ('numba', 'pyspark') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


def test_the_numba_cache_stamp_names_the_installed_numba() -> None:
    """The cache stamp hooks into an internal of Numba: an upgrade must come past it."""
    import numba

    from causal_spark.replay import cache

    assert numba.__version__ == cache.NUMBA_VERSION
    assert cache._WingStampedLocator in numba.core.caching.CacheImpl._locator_classes
