"""mpicoll.core.commcache: one value per communicator, freed with it. Serial (COMM_SELF)."""
from mpi4py import MPI

from mpicoll.core.commcache import CommCache


def test_one_value_per_communicator_made_once():
    made = []

    def make():
        made.append(object())
        return made[-1]

    cache = CommCache()
    a, b = MPI.COMM_SELF.Dup(), MPI.COMM_SELF.Dup()
    try:
        assert cache.get(a) is None
        va = cache.get_or_create(a, make)
        assert cache.get_or_create(a, make) is va and cache.get(a) is va
        vb = cache.get_or_create(b, make)
        assert vb is not va and len(made) == 2
        # a Dup does not inherit the value (no copy function)
        c = a.Dup()
        try:
            assert cache.get(c) is None
        finally:
            c.Free()
    finally:
        a.Free()
        b.Free()


def test_get_makes_no_keyval():
    cache = CommCache()
    assert cache.get(MPI.COMM_SELF) is None
    assert cache._keyval is None


def test_on_free_runs_when_the_communicator_is_freed():
    freed = []
    cache = CommCache(freed.append)
    a, b = MPI.COMM_SELF.Dup(), MPI.COMM_SELF.Dup()
    va = cache.get_or_create(a, dict)
    cache.set(b, "b")
    assert freed == []
    a.Free()
    assert len(freed) == 1 and freed[0] is va
    b.Free()
    assert freed[1:] == ["b"]


def test_set_replaces_and_frees_the_old_value():
    freed = []
    cache = CommCache(freed.append)
    a = MPI.COMM_SELF.Dup()
    try:
        cache.set(a, "old")
        cache.set(a, "new")
        assert freed == ["old"] and cache.get(a) == "new"
    finally:
        a.Free()
    assert freed == ["old", "new"]


def test_separate_caches_keep_separate_values():
    one, two = CommCache(), CommCache()
    a = MPI.COMM_SELF.Dup()
    try:
        one.set(a, 1)
        assert two.get(a) is None and two.get_or_create(a, lambda: 2) == 2
        assert one.get(a) == 1
    finally:
        a.Free()
