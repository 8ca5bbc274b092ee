"""The house rules of mpicoll's imports: no cycles, floors run one way, no private names cross.

Parsed from the source with ``ast``: every ``import``/``from ... import``
anywhere in a module (module level and function level alike) is an edge;
``from . import sub`` of submodules only is an edge to those submodules, not
to the package. The floors, bottom up, are :data:`FLOORS`; a module may
import its own folder and lower floors only, and never a name or module
whose name starts with an underscore from another folder.
"""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "mpicoll"


def _modules():
    mods = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _graph(mods):
    graph = {m: set() for m in mods}
    for m, path in mods.items():
        pkg = m if path.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods]
                targets = subs if len(subs) == len(node.names) else [target] + subs
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[m].update(t for t in targets if t in mods and t != m)
    return graph


def _cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    mods = _modules()
    assert "mpicoll.engine.run" in mods and "mpicoll.bench.cli" in mods
    assert _cycles(_graph(mods)) == []


#: Folder (or top-level module) -> floor. Tools stand on the faces, the faces on the calls,
#: the calls on the engine, the engine on the plans and algorithms, they on the arguments
#: and the devices, everything on core.
FLOORS = {
    "core": 0,
    "device": 1,
    "args": 2, "coll": 2,
    "sched": 3,
    "engine": 4,
    "calls": 5,
    # the faces: the public API, the drop-in, torch's names, the torch backend, the GPU face
    "__init__": 6, "api": 6, "comm": 6, "distributed": 6, "torch": 6, "gpu": 6,
    "faces": 6, "p2p_methods": 6, "p2p_calls": 6,
    "monitored": 6, "shm": 6,
    # the tools
    "demo": 7, "bench": 7, "verify": 7, "testing": 7, "simulate": 7, "run": 7,
}


def _room(mod):
    """The folder (or top-level module) of a module name: its floor's key."""
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _edges(mods):
    """(importer, imported module, imported name or None) for every import inside mpicoll."""
    out = []
    for m, path in mods.items():
        pkg = m if path.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    if sub in mods:
                        out.append((m, sub, None))
                    elif target in mods:
                        out.append((m, target, a.name))
            elif isinstance(node, ast.Import):
                out += [(m, a.name, None) for a in node.names if a.name in mods]
    return out


def test_floors_run_one_way():
    mods = _modules()
    unknown = sorted({_room(m) for m in mods} - set(FLOORS))
    assert not unknown, f"folders without a floor in FLOORS: {unknown}"
    up = [f"{a} imports {b}" for a, b, _ in _edges(mods)
          if _room(a) != _room(b) and FLOORS[_room(b)] > FLOORS[_room(a)]]
    assert not up, "imports that run back up a floor:\n" + "\n".join(up)


def test_no_private_name_crosses_a_folder():
    mods = _modules()
    bad = []
    for a, b, name in _edges(mods):
        if _room(a) == _room(b) or b == "mpicoll":
            continue
        private_module = any(part.startswith("_") and part != "__init__"
                             for part in b.split(".")[1:])
        if private_module or (name is not None and name.startswith("_")):
            bad.append(f"{a} imports {b}{'.' + name if name else ''}")
    assert not bad, "private names imported across folders:\n" + "\n".join(bad)


def test_the_checker_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
