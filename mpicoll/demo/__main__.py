"""``python -m mpicoll.demo``: see :mod:`mpicoll.demo`."""
from mpicoll.core.failfast import run_main

from .cli import main

if __name__ == "__main__":
    run_main(main)
