"""The typed face: ``mpicoll/__init__.pyi`` is current, true to the runtime, and checks callers.

The stub is generated from the package (``tools/make_stub.py``); mypy's ``stubtest``
compares it with what ``import mpicoll`` really holds (every name of ``__all__``, every
signature, the classes' members); mypy then checks the examples against it, and a
deliberately wrong use must be refused.
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "pyproject.toml")

pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")


def run(*args, timeout=600):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_stub_is_current():
    proc = run("tools/make_stub.py", "--check")
    assert proc.returncode == 0, proc.stderr


def test_stub_matches_the_runtime():
    proc = run("-m", "mypy.stubtest", "mpicoll", "--mypy-config-file", CONFIG,
               "--allowlist", "tools/stubtest_allowlist.txt")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]


def test_examples_type_check_against_the_face():
    files = sorted(os.path.join("examples", f) for f in os.listdir(os.path.join(ROOT, "examples"))
                   if f.endswith(".py"))
    proc = run("-m", "mypy", "--config-file", CONFIG, *files, "docs/examples/my_algo.py")
    assert proc.returncode == 0, proc.stdout[-6000:]


def test_a_wrong_use_is_refused(tmp_path):
    bad = tmp_path / "bad_use.py"
    bad.write_text("import numpy as np\nimport mpicoll\nx = np.ones(3)\n"
                   "mpicoll.allreduce(x, algoritm='ring')\n"
                   "mpicoll.iallreduce(x).Start()\n"
                   "mpicoll.bcast(x, root='0')\n")
    proc = run("-m", "mypy", "--config-file", CONFIG, str(bad))
    assert proc.returncode == 1, proc.stdout
    for want in ('Unexpected keyword argument "algoritm" for "allreduce"',
                 '"Request" has no attribute "Start"',
                 'Argument "root" to "bcast" has incompatible type "str"; expected "int"'):
        assert want in proc.stdout, proc.stdout
