"""Every command's ``--help`` is plain text, as a terminal shows it.

The modules' docstrings are reST for the documentation; ``--help`` once
printed them as they are (````double quotes````, ``:mod:`` roles, ``::``
blocks). Each command line's help is asked for as a user would, and the
bench's commands through its parser (one process for all of them). Serial.
"""
import re
import subprocess
import sys

import pytest

from mpicoll.bench.cli import build_parser

#: markup of reST that a plain help text never holds
REST = re.compile(r"``|:(mod|func|class|data|meth|attr|ref|doc):`|::\s*$", re.M)

COMMANDS = ["mpicoll.run", "mpicoll.demo", "mpicoll.verify", "mpicoll.bench", "mpicoll.gpu",
            "mpicoll.shm", "mpicoll.testing.soak", "mpicoll.bench.checkmodes",
            "mpicoll.simulate.calibrate"]


@pytest.mark.parametrize("module", COMMANDS)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_a_command_s_help_is_plain_text(module, flag):
    proc = subprocess.run([sys.executable, "-m", module, flag], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip(), f"python -m {module} {flag} printed nothing"
    found = REST.search(proc.stdout)
    assert found is None, f"python -m {module} {flag} shows reST: {found.group(0)!r}"


def test_the_bench_commands_help_is_plain_text():
    top = build_parser()
    subs = [a for a in top._actions if a.__class__.__name__ == "_SubParsersAction"][0]
    assert {"allreduce", "report", "plot", "predict", "latency", "simulate"} <= set(subs.choices)
    for name, parser in subs.choices.items():
        found = REST.search(parser.format_help())
        assert found is None, f"bench {name} --help shows reST: {found.group(0)!r}"
