"""``python -m mpicoll.bench``: see :mod:`mpicoll.bench.cli`."""
from mpicoll.core.failfast import run_main

from .cli import main

if __name__ == "__main__":
    run_main(main)
