"""``python -m mpicoll.shm``: what the shm algorithms use on this job's nodes."""
import sys

from . import main

sys.exit(main())
