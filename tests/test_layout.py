"""Node layouts and the algorithms they refuse: a simulated node may span real hosts.

``MPICOLL_NODES`` gives a layout its nodes; the shared-memory domains
(``Split_type(COMM_TYPE_SHARED)``) are kept beside them. Algorithms that read
peers' memory (the shm ones, ``hierarchical:intra=shm``) are refused where a
node of the layout spans domains (netns nodes under a simulated layout), and
allowed where each node lies in one. Serial: layouts built by hand.
"""
import pytest

from mpicoll.core.registry import lookup
from mpicoll.core.topology import Layout


def _refusal(primitive, name, lay, commutative=True):
    return lookup(primitive, name).check_layout(lay, commutative)


def test_a_layout_without_domains_takes_its_nodes_as_them():
    lay = Layout([0, 0, 1, 1])
    assert lay.memory == lay.nodes
    assert lay.memory_split() is None
    assert lay.shares_memory([0, 1]) and not lay.shares_memory([1, 2])


@pytest.mark.parametrize("primitive", ["allreduce", "reduce", "bcast", "allgather"])
def test_intra_shm_is_refused_where_a_node_spans_domains(primitive):
    # cyclic:2 over two hosts of two ranks: node 0 = ranks 0, 2 (hosts 0 and 1)
    lay = Layout([0, 1, 0, 1], "MPICOLL_NODES=cyclic:2", memory=[0, 0, 2, 2])
    why = _refusal(primitive, "hierarchical:intra=shm", lay)
    assert why and "node 0 (ranks 0 2)" in why and "2 shared-memory domains" in why
    # the point-to-point intra phases still run there
    assert _refusal(primitive, "hierarchical:intra=linear", lay) is None
    # blocks of the hosts: each node in one domain
    ok = Layout([0, 0, 1, 1], "MPICOLL_NODES=2", memory=[0, 0, 2, 2])
    assert _refusal(primitive, "hierarchical:intra=shm", ok) is None


def test_flat_shm_is_refused_on_one_simulated_node_across_hosts():
    lay = Layout([0, 0, 0, 0], "MPICOLL_NODES=4", memory=[0, 0, 2, 2])
    why = _refusal("allreduce", "shm", lay)
    assert why and "shared-memory domains" in why
    assert _refusal("allreduce", "shm", Layout([0, 0, 0, 0])) is None
    assert "nodes" in _refusal("allreduce", "shm", Layout([0, 0, 1, 1]))
