"""Clusters for SMPI: named presets with parameters, or an SMPI platform XML file.

A :class:`Platform` is an XML description, a host for each rank (the
hostfile ``smpirun`` reads) and the SimGrid settings it is meant with.
Presets (``NAME:key=value,...``; bandwidths as SimGrid writes them —
``100Gbps`` bits, ``12.5GBps`` bytes per second; times ``1us``, ``20us``, ``1ms``):

``crossbar:bw=..,lat=..``
    N hosts, each with its own duplex link to a contention-free switch: a
    message costs ``2·lat + bytes/bw`` (it crosses two links), whatever else
    moves, except on its own two endpoints' links. The Hockney model's view;
    the closed forms are checked on it.
``fattree:bw=100Gbps,lat=1us,leaf=32,up=32``
    A two-level fat tree (SimGrid's ``FAT_TREE`` cluster): ``leaf`` hosts per
    leaf switch, ⌈N/leaf⌉ leaf switches, each with ``up`` uplinks, one to each
    of ``up`` top switches (``up`` = ``leaf``: full bisection; fewer: tapered).
    Every link ``bw`` and ``lat``: 2 links under one leaf switch, 4 across.
``nodes:K=8,bw=..,lat=..,intra_bw=..,intra_lat=..,bb=..``
    Nodes of K ranks (rank r on node r // K): ranks of a node talk through
    the node's loopback (``intra_bw``, ``intra_lat``), the others through
    their nodes' links (``bw``, ``lat``; one link per node, shared by its K
    ranks in each direction) and, if ``bb`` is given, a backbone of that
    bandwidth shared by every message between nodes.
``machine:model=benchmarks/model_n2.json``
    A crossbar whose α and β are this machine's, as ``bench fit`` measured
    them (``alpha_s``, ``beta_s_per_byte`` of its JSON output).

Settings (:data:`DEFAULT_CFG`): SimGrid's CM02 network model (a message's
time is its latency plus bytes / its share of the bandwidth; no TCP slow
start or message-size factors) and no cross-traffic (replies do not load
the reverse direction): link parameters then mean what they say.
``--network-model SMPI`` uses SMPI's calibrated piecewise model instead.
"""
import json
import math
import os
import re

__all__ = ["Platform", "preset", "from_xml", "parse", "parse_bw", "parse_time", "DEFAULT_CFG",
           "PRESETS"]

DEFAULT_CFG = ("--cfg=network/model:CM02", "--cfg=network/crosstraffic:0")

_BW = {"bps": 1 / 8, "Bps": 1.0}
_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
           "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40}
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def parse_bw(text):
    """Bytes per second of a SimGrid bandwidth (``100Gbps``, ``12.5GBps``, ``1e9``: B/s)."""
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([kKMGT]i?)?(bps|Bps)?\s*", str(text))
    if not m:
        raise ValueError(f"bandwidth: expected a number with a unit like 100Gbps or 12.5GBps; "
                         f"got {text!r}")
    value = float(m.group(1)) * _PREFIX[m.group(2) or ""]
    return value * _BW[m.group(3) or "Bps"]


def parse_time(text):
    """Seconds of a SimGrid time (``1us``, ``20us``, ``1ms``, ``0.5``: seconds)."""
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*(s|ms|us|ns)?\s*", str(text))
    if not m:
        raise ValueError(f"latency: expected a number with a unit like 1us or 100us; got {text!r}")
    return float(m.group(1)) * _TIME[m.group(2) or "s"]


class Platform:
    """An SMPI platform for N ranks: XML text, each rank's host, settings and a description."""

    def __init__(self, name, xml, hosts, params, cfg=DEFAULT_CFG, alpha=None, beta=None):
        self.name, self.xml, self.hosts, self.params = name, xml, list(hosts), dict(params)
        self.cfg = tuple(cfg)
        #: the end-to-end α (s) and β (s/B) of one message between two idle ranks on
        #: different hosts, where the platform has one (crossbar, machine): the closed forms'
        self.alpha, self.beta = alpha, beta

    def describe(self):
        """A JSON-able record of the platform (for the results)."""
        return {"name": self.name, "params": self.params, "cfg": list(self.cfg),
                "alpha_s": self.alpha, "beta_s_per_byte": self.beta}

    def write(self, directory):
        """Write ``platform.xml`` and ``hosts`` into ``directory``; their paths."""
        xml = os.path.join(directory, "platform.xml")
        hostfile = os.path.join(directory, "hosts")
        with open(xml, "w") as f:
            f.write(self.xml)
        with open(hostfile, "w") as f:
            f.write("\n".join(self.hosts) + "\n")
        return xml, hostfile


_HEAD = ("<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
         "<platform version=\"4.1\">\n")


def _cluster(nhosts, bw, lat, extra="", loop_bw="1000GBps", loop_lat="0us"):
    # speed: the replay's actions here are sleeps and messages; 1 Gf is SMPI's usual figure
    return (_HEAD + f"  <cluster id=\"c\" prefix=\"h\" suffix=\"\" radical=\"0-{nhosts - 1}\" "
            f"speed=\"1Gf\" bw=\"{bw}\" lat=\"{lat}\" loopback_bw=\"{loop_bw}\" "
            f"loopback_lat=\"{loop_lat}\"{extra}/>\n</platform>\n")


def _crossbar(n, bw="100Gbps", lat="1us"):
    b, t = parse_bw(bw), parse_time(lat)
    return Platform("crossbar", _cluster(n, bw, lat), [f"h{r}" for r in range(n)],
                    {"bw": bw, "lat": lat}, alpha=2 * t, beta=1 / b)


def _fattree(n, bw="100Gbps", lat="1us", leaf="32", up=None):
    leaf = int(leaf)
    up = leaf if up is None else int(up)
    if leaf < 1 or up < 1:
        raise ValueError(f"fattree: leaf and up must be >= 1; got leaf={leaf}, up={up}")
    nleaf = max(1, math.ceil(n / leaf))
    parse_bw(bw), parse_time(lat)
    topo = f"2;{leaf},{nleaf};1,{up};1,1"
    extra = f" topology=\"FAT_TREE\" topo_parameters=\"{topo}\""
    return Platform("fattree", _cluster(leaf * nleaf, bw, lat, extra),
                    [f"h{r}" for r in range(n)],
                    {"bw": bw, "lat": lat, "leaf": leaf, "up": up, "topo_parameters": topo})


def _nodes(n, K="8", bw="100Gbps", lat="1us", intra_bw="50GBps", intra_lat="0.5us", bb=None):
    K = int(K)
    if K < 1:
        raise ValueError(f"nodes: K (ranks per node) must be >= 1; got {K}")
    nnodes = max(1, math.ceil(n / K))
    parse_bw(bw), parse_time(lat), parse_bw(intra_bw), parse_time(intra_lat)
    extra = f" bb_bw=\"{bb}\" bb_lat=\"0us\"" if bb else ""
    if bb:
        parse_bw(bb)
    # The loopback link is one per host and shared (FATPIPE: each flow gets the full rate,
    # none slows another): a node's ranks' messages to each other do not contend.
    xml = _cluster(nnodes, bw, lat, extra + f" core=\"{K}\"", intra_bw, intra_lat)
    return Platform("nodes", xml, [f"h{r // K}" for r in range(n)],
                    {"K": K, "bw": bw, "lat": lat, "intra_bw": intra_bw, "intra_lat": intra_lat,
                     "bb": bb})


def _machine(n, model="benchmarks/model_n2.json"):
    try:
        with open(model) as f:
            m = json.load(f)
    except OSError as exc:
        raise ValueError(f"machine: cannot read the fitted model {model!r} ({exc}); "
                         f"write one with `mpiexec -n 2 python -m mpicoll.bench fit -o FILE`") \
            from None
    alpha, beta = m["alpha_s"], m["beta_s_per_byte"]
    p = _crossbar(n, f"{1 / beta:.6g}Bps", f"{alpha / 2 * 1e6:.6g}us")
    p.name, p.params = "machine", {"model": model, "alpha_s": alpha, "beta_s_per_byte": beta}
    return p


PRESETS = {"crossbar": _crossbar, "fattree": _fattree, "nodes": _nodes, "machine": _machine}


def preset(text, nranks):
    """The :class:`Platform` of a preset ``NAME[:key=value,...]`` for ``nranks`` ranks."""
    name, _, rest = text.partition(":")
    if name not in PRESETS:
        raise ValueError(f"--platform: expected an .xml file or one of {', '.join(PRESETS)}; "
                         f"got {text!r}")
    kw = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        k, eq, v = item.partition("=")
        if not eq:
            raise ValueError(f"--platform {name}: expected key=value; got {item!r}")
        kw[k.strip()] = v.strip()
    try:
        return PRESETS[name](nranks, **kw)
    except TypeError as exc:
        raise ValueError(f"--platform {name}: {exc}") from None


def from_xml(path, hostfile, nranks):
    """A :class:`Platform` from an SMPI XML file and a hostfile (a host a line, rank order)."""
    if not hostfile:
        raise ValueError(f"--platform {path}: an XML platform needs --hostfile (one host name "
                         f"a line, rank order; a host may appear for several ranks)")
    with open(path) as f:
        xml = f.read()
    with open(hostfile) as f:
        hosts = [h.split(":")[0].strip() for h in f if h.strip()]
    if len(hosts) < nranks:
        raise ValueError(f"--hostfile {hostfile}: {len(hosts)} hosts for {nranks} ranks")
    return Platform(os.path.basename(path), xml, hosts[:nranks], {"xml": path,
                                                                  "hostfile": hostfile})


def parse(text, nranks, hostfile=None):
    """``--platform``: an XML file (with ``hostfile``) or a preset, for ``nranks`` ranks."""
    if text.endswith(".xml"):
        return from_xml(text, hostfile, nranks)
    return preset(text, nranks)
