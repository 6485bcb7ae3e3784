"""The package's layering (ARCHITECTURE.md): no import cycle among its modules, counting imports inside functions,
no private name imported across modules or reached by tests and benchmarks, and tests and benchmarks kept apart."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bayescale"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path):
    """(imported module, imported names) for every import statement of the file, at any depth."""
    pkg = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1] + ([base] if base else []))
            yield base, [a.name for a in node.names]


def graph() -> dict:
    mods = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges = {}
    for name, path in mods.items():
        out = set()
        for mod, names in imports(path):
            if mod in mods and mod != name:
                out.add(mod)
            for n in names:  # "from bayescale import calibration" imports the submodule
                if f"{mod}.{n}" in mods:
                    out.add(f"{mod}.{n}")
        # a package's __init__ runs before its submodules: importing a submodule imports its parents
        edges[name] = {m for m in out if not name.startswith(m + ".")}
    return edges


def test_no_import_cycle():
    edges = graph()
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == "open":
                pytest.fail("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m)


def test_no_private_name_crosses_modules():
    bad = []
    for path in PACKAGE.rglob("*.py"):
        for mod, names in imports(path):
            if mod.startswith("bayescale") and mod != module_name(path):
                bad += [f"{path.relative_to(ROOT)}: {mod}.{n}" for n in names if n.startswith("_") and n != "__version__"]
    assert not bad, bad


def private_uses(path: Path) -> list[str]:
    """bayescale's private names a file outside the package reaches: imported (``from bayescale.fit import _x``),
    read as an attribute of a bayescale module (``programs._LOADED``) or patched by name
    (``monkeypatch.setattr(programs, "_LOADED", ...)``)."""
    tree = ast.parse(path.read_text())
    local, out = set(), []  # local names bound to bayescale modules or their objects
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bayescale"):
            out += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_") and a.name != "__version__"]
            local |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            local |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith("bayescale")}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in local:
                out.append(ast.unparse(node))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setattr"
              and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and node.args[0].id in local
              and isinstance(node.args[1], ast.Constant) and str(node.args[1].value).startswith("_")):
            out.append(f"{node.args[0].id}.{node.args[1].value}")
    return out


@pytest.mark.parametrize("folder", ["tests", "benchmarks"])
def test_tests_and_benchmarks_use_the_public_api(folder):
    bad = {str(p.relative_to(ROOT)): uses for p in (ROOT / folder).rglob("*.py") if (uses := private_uses(p))}
    assert not bad, bad


@pytest.mark.parametrize("folder, other", [("tests", "benchmarks"), ("benchmarks", "tests"), ("bayescale", "benchmarks")])
def test_tests_and_benchmarks_stay_apart(folder, other):
    bad = [str(p.relative_to(ROOT)) for p in (ROOT / folder).rglob("*.py")
           if any(mod == other or mod.startswith(other + ".") for mod, _ in imports(p))]
    assert not bad, bad
