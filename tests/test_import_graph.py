"""The house's rules, read from the imports of jaxinit, theory and experiments (module-level and inside functions).

- No import cycle between modules, and none between rooms (a sub-package of jaxinit, a top-level jaxinit module,
  theory, experiments): an import that goes up a floor closes a cycle of rooms.
- The engine (jaxinit/train/) imports nothing of the run wing (jaxinit/run/); theory/ imports nothing of jaxinit;
  no study folder (jaxinit/forgetting, jaxinit/igb, jaxinit/memory) imports another.
- No module hands on another module's names for old callers (`reexports`): outside a package's __init__.py a
  name bound by importing a project module is not listed in ``__all__``, not imported under ``# noqa: F401``
  (an import kept only to be importable from here), and no module ``__getattr__`` forwards to a project module;
  a package's __init__.py (its face) hands on names of the package's own modules only. And the other side
  (`borrowed`): a name is imported from the module that defines it (or from a package's face), never from a
  module that only imported it itself.

Each check is a function of a source tree; the synthetic trees below show that each can fail.
"""
from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("jaxinit", "theory", "experiments")
STUDIES = ("jaxinit.forgetting", "jaxinit.igb", "jaxinit.memory")


class Edge(NamedTuple):
    src: str
    dst: str
    line: int
    local: bool                 # inside a function
    names: tuple[str, ...]      # the names taken (``from dst import names``); () for ``import dst``


class Tree(NamedTuple):
    modules: dict[str, Path]    # dotted name -> file
    edges: list[Edge]


def _name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read_tree(root: Path, packages=PACKAGES) -> Tree:
    modules = {_name(root, p): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))
               if "__pycache__" not in p.parts}
    edges = []
    for mod, path in modules.items():
        edges += _edges(mod, path, modules)
    return Tree(modules, edges)


def _resolve(name: str, modules: dict) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _base(mod: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    parts = parts[:len(parts) - node.level + 1]
    return ".".join(parts + ([node.module] if node.module else []))


def _edges(mod: str, path: Path, modules: dict) -> list[Edge]:
    tree = ast.parse(path.read_text())
    local = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [(_resolve(a.name, modules), ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(mod, path, node)
            targets = [(f"{base}.{a.name}", ()) if f"{base}.{a.name}" in modules else (_resolve(base, modules), (a.name,))
                       for a in node.names]
        else:
            continue
        for dst, names in targets:
            if dst is not None and dst != mod:
                out.append(Edge(mod, dst, node.lineno, id(node) in local, names))
    return out


# --------------------------------------------------------------------------- the checks
def cycles(edges) -> list[list[str]]:
    """Strongly connected sets of more than one node (Tarjan, iterative), each sorted."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, found, counter = {}, {}, [], set(), [], 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return sorted(found)


def room(mod: str) -> str:
    """A sub-package of jaxinit, a top-level jaxinit module, theory or experiments."""
    parts = mod.split(".")
    return ".".join(parts[:2]) if parts[0] == "jaxinit" else parts[0]


def module_cycles(tree: Tree) -> list[list[str]]:
    return cycles((e.src, e.dst) for e in tree.edges)


def room_cycles(tree: Tree) -> list[list[str]]:
    return cycles((room(e.src), room(e.dst)) for e in tree.edges if room(e.src) != room(e.dst))


def _inside(mod: str, pkg: str) -> bool:
    return mod == pkg or mod.startswith(pkg + ".")


def crossings(tree: Tree, src: str, dst: str) -> list[str]:
    """``file:line src -> dst`` for every import from inside ``src`` into ``dst``."""
    return [f"{e.src}:{e.line} -> {e.dst}" for e in tree.edges if _inside(e.src, src) and _inside(e.dst, dst)]


def study_crossings(tree: Tree) -> list[str]:
    return [x for a in STUDIES for b in STUDIES if a != b for x in crossings(tree, a, b)]


def _imported(tree_ast: ast.Module, mod: str, path: Path, modules: dict) -> dict[str, tuple[str, ast.stmt]]:
    """Module-level names bound by importing a project module: name -> (the module, the statement)."""
    bound = {}
    for node in tree_ast.body:
        if isinstance(node, ast.ImportFrom):
            base = _base(mod, path, node)
            if _resolve(base, modules) is None:
                continue
            for a in node.names:
                bound[a.asname or a.name] = (base, node)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if _resolve(a.name, modules) is not None:
                    bound[a.asname or a.name.split(".")[0]] = (a.name, node)
    return bound


def reexports(tree: Tree) -> list[str]:
    """Names handed on for old callers (module docstring), one ``file:line: why`` each."""
    found = []
    for mod, path in tree.modules.items():
        text = path.read_text()
        lines = text.splitlines()
        body = ast.parse(text)
        face = path.name == "__init__.py"
        bound = _imported(body, mod, path, tree.modules)
        for name, (src, node) in bound.items():
            if face and _inside(src, mod):
                continue                # a package's face hands on its own modules' names
            span = " ".join(lines[node.lineno - 1:node.end_lineno])
            if re.search(r"#\s*noqa\b[^#]*F401", span) and _resolve(src, tree.modules) is not None:
                found.append(f"{mod}:{node.lineno}: {name} imported from {src} under noqa: F401 (kept to be importable here)")
        for node in body.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                listed = [e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)]
                for name in listed:
                    if name in bound and not (face and _inside(bound[name][0], mod)):
                        found.append(f"{mod}:{node.lineno}: __all__ hands on {name} of {bound[name][0]}")
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                for inner in ast.walk(node):
                    targets = [inner.module] if isinstance(inner, ast.ImportFrom) and inner.module else \
                        [a.name for a in inner.names] if isinstance(inner, ast.Import) else []
                    targets += [c.value for c in ast.walk(inner) if isinstance(inner, ast.Dict)
                                and isinstance(c, ast.Constant) and isinstance(c.value, str)]
                    if not face and any(_resolve(t, tree.modules) for t in targets if isinstance(t, str)):
                        found.append(f"{mod}:{node.lineno}: module __getattr__ forwards to another module")
                        break
    return sorted(set(found))


def _defined(body: ast.Module) -> set[str]:
    """Names a module defines itself (functions, classes, assignments; at module level or under if / try)."""
    names: set[str] = set()
    for node in ast.walk(body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def borrowed(tree: Tree) -> list[str]:
    """``from M import X`` where M is a plain module (not a package's face) that does not define X but only
    imported it: X is imported from where it is defined."""
    info = {}
    for mod, path in tree.modules.items():
        if path.name != "__init__.py":
            body = ast.parse(path.read_text())
            info[mod] = (_defined(body), set(_imported(body, mod, path, tree.modules)))
    found = []
    for e in tree.edges:
        if e.dst in info:
            defined, imported = info[e.dst]
            found += [f"{e.src}:{e.line}: {n} from {e.dst}, which only imports it" for n in e.names
                      if n in imported and n not in defined]
    return sorted(set(found))


# --------------------------------------------------------------------------- this house
HOUSE = read_tree(ROOT)


def _none(found: list) -> None:
    assert found == [], "\n".join(map(str, found))


def test_the_graph_holds_every_module_and_both_kinds_of_import():
    assert {"jaxinit.train.engine", "jaxinit.run.cli", "theory.meanfield", "experiments.forgetting"} <= set(HOUSE.modules)
    kinds = {e.local for e in HOUSE.edges}
    assert kinds == {True, False}        # function-local imports are read too


def test_no_import_cycle():
    _none(module_cycles(HOUSE))


def test_no_import_goes_up_a_floor():
    _none(room_cycles(HOUSE))


def test_the_engine_imports_nothing_of_the_run_wing():
    _none(crossings(HOUSE, "jaxinit.train", "jaxinit.run"))


def test_theory_imports_nothing_of_jaxinit():
    _none(crossings(HOUSE, "theory", "jaxinit"))


def test_no_study_folder_imports_another():
    _none(study_crossings(HOUSE))


def test_no_module_hands_on_another_modules_names():
    _none(reexports(HOUSE))


def test_names_are_imported_from_where_they_are_defined():
    _none(borrowed(HOUSE))


# --------------------------------------------------------------------------- every check can fail
def _write(root: Path, files: dict[str, str]) -> Tree:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return read_tree(root)


def test_each_check_finds_its_offence(tmp_path):
    tree = _write(tmp_path, {
        "jaxinit/__init__.py": "",
        "jaxinit/a.py": "from jaxinit import b\nX = 1\n",
        "jaxinit/b.py": "def f():\n    from jaxinit.a import X\n    return X\n",           # a <-> b, one side local
        "jaxinit/train/__init__.py": "",
        "jaxinit/train/engine.py": "def g():\n    from jaxinit.run import sink\n",
        "jaxinit/run/__init__.py": "",
        "jaxinit/run/sink.py": "from jaxinit.train import engine\n",                  # rooms train <-> run
        "jaxinit/forgetting/__init__.py": "",
        "jaxinit/forgetting/loop.py": "from jaxinit.igb.nets import draw  # noqa: F401\n",
        "jaxinit/igb/__init__.py": "from jaxinit.a import X\n__all__ = ['X']\n",
        "jaxinit/igb/nets.py": "def draw():\n    pass\n",
        "jaxinit/memory/__init__.py": "",
        "jaxinit/memory/study.py": "from jaxinit.forgetting.loop import draw\n",
        "jaxinit/config.py": "def __getattr__(name):\n    from jaxinit import a\n    return getattr(a, name)\n",
        "theory/__init__.py": "",
        "theory/x.py": "import jaxinit.a\n",
        "experiments/__init__.py": "",
    })
    assert ["jaxinit.a", "jaxinit.b"] in module_cycles(tree)
    assert ["jaxinit.run", "jaxinit.train"] in room_cycles(tree)
    assert crossings(tree, "jaxinit.train", "jaxinit.run") == ["jaxinit.train.engine:2 -> jaxinit.run.sink"]
    assert crossings(tree, "theory", "jaxinit") == ["theory.x:1 -> jaxinit.a"]
    assert study_crossings(tree) == ["jaxinit.forgetting.loop:1 -> jaxinit.igb.nets",
                                     "jaxinit.memory.study:1 -> jaxinit.forgetting.loop"]
    found = reexports(tree)
    assert any(f.startswith("jaxinit.forgetting.loop:1: draw") for f in found)        # noqa: F401
    assert any(f.startswith("jaxinit.igb:2: __all__ hands on X") for f in found)      # a face, but not its own
    assert any(f.startswith("jaxinit.config:1: module __getattr__") for f in found)
    assert borrowed(tree) == ["jaxinit.memory.study:1: draw from jaxinit.forgetting.loop, which only imports it"]


def test_a_clean_tree_passes_every_check(tmp_path):
    tree = _write(tmp_path, {
        "jaxinit/__init__.py": "",
        "jaxinit/errors.py": "class ConfigError(ValueError):\n    pass\n",
        "jaxinit/train/__init__.py": "",
        "jaxinit/train/engine.py": "from jaxinit.errors import ConfigError\n",
        "jaxinit/run/__init__.py": "",
        "jaxinit/run/sink.py": "from jaxinit.errors import ConfigError\n",
        "jaxinit/igb/__init__.py": "from jaxinit.igb.nets import draw\n__all__ = ['draw']\n",   # its own face
        "jaxinit/igb/nets.py": "def draw():\n    from jaxinit.run import sink\n",
        "theory/__init__.py": "",
        "experiments/__init__.py": "",
        "experiments/x.py": "from jaxinit.igb import draw\nfrom jaxinit.errors import ConfigError as E\n",
    })
    assert module_cycles(tree) == room_cycles(tree) == study_crossings(tree) == []
    assert crossings(tree, "jaxinit.train", "jaxinit.run") == crossings(tree, "theory", "jaxinit") == []
    assert reexports(tree) == borrowed(tree) == []
