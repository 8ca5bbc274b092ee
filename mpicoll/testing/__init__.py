"""Tools that test an mpicoll build on a real MPI library: the soak.

``python -m mpicoll.testing.soak``: random calls, each compared with native MPI.

Not the library's face: they drive the public functions as a user would and
report what they find (random calls against native MPI, leaks, stray
messages, memory). The symbolic verifier is :mod:`mpicoll.verify`.
"""
