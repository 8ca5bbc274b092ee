"""The faces as source: ``mpicoll/faces.py`` and ``mpicoll/p2p_methods.py`` are current and typed.

They are written by ``tools/make_faces.py`` from the binders and methods in
``mpicoll/calls``; nothing of the public face is made by ``exec`` at import.
"""
import inspect
import os
import subprocess
import sys

import pytest

import mpicoll
from mpicoll import calls, faces, p2p_methods

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args, timeout=600):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_generated_modules_are_current():
    proc = run("tools/make_faces.py", "--check")
    assert proc.returncode == 0, proc.stderr


def test_every_binder_has_its_three_functions_with_its_signature():
    for prim in calls.DEFINED.values():
        for binder in prim.api:
            params = list(inspect.signature(binder).parameters.values())
            for name in (binder.__name__, "i" + binder.__name__, binder.__name__ + "_init"):
                fn = getattr(mpicoll, name)
                assert fn is faces.FUNCTIONS[name]
                assert inspect.getsourcefile(fn) == faces.__file__
                got = list(inspect.signature(fn).parameters.values())
                assert [(p.name, p.default) for p in got[:len(params)]] == \
                    [(p.name, p.default) for p in params]
                assert [p.name for p in got[len(params):]] == ["comm", "algorithm"]


def test_every_method_is_written_out_on_p2pcomm():
    for prim in calls.DEFINED.values():
        for method in prim.methods:
            want = list(inspect.signature(method).parameters)[4:]
            for name in (method.__name__, "I" + method.__name__.lower(),
                         method.__name__ + "_init"):
                fn = getattr(mpicoll.P2PComm, name)
                assert fn is getattr(p2p_methods.P2PMethods, name)
                got = list(inspect.signature(fn).parameters)[1:]
                assert got[:len(want)] == want


def test_no_exec_at_import():
    for mod in ("api", "comm", "faces", "p2p_methods", "p2p_calls"):
        with open(os.path.join(ROOT, "mpicoll", mod + ".py")) as f:
            text = f.read()
        assert "exec(" not in text, mod


FACE_MODULES = [os.path.join("mpicoll", f + ".py")
                for f in ("api", "comm", "faces", "p2p_methods", "p2p_calls")]


def test_the_faces_type_check():
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    proc = run("-m", "mypy", "--config-file", "pyproject.toml", "--no-incremental",
               *FACE_MODULES)
    assert proc.returncode == 0, proc.stdout[-6000:]


@pytest.mark.parametrize("module, at", [("faces", "\ndef allreduce("),
                                        ("p2p_methods", "\n    def Allreduce(")])
def test_the_type_check_reads_the_generated_bodies(tmp_path, module, at):
    # The generated functions carry no annotations, and mypy skips the bodies of such
    # functions unless told otherwise: an error in one must be found all the same.
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    path = os.path.join("mpicoll", module + ".py")
    with open(os.path.join(ROOT, path)) as f:
        text = f.read()
    start = text.index(at)
    body = text.index('"""\n', text.index('"""', start) + 3) + 4     # after its docstring
    indent = " " * (at.index("def") - 1 + 4)
    shadow = tmp_path / (module + ".py")
    shadow.write_text(text[:body] + f"{indent}_wrong: int = 'a text' + 1\n" + text[body:])
    proc = run("-m", "mypy", "--config-file", "pyproject.toml", "--no-incremental",
               "--shadow-file", path, str(shadow), *FACE_MODULES)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert f"{path}:" in proc.stdout and "Unsupported operand types" in proc.stdout, \
        proc.stdout[-3000:]
