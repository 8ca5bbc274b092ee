"""The documentation's algorithm gallery covers the registry: every algorithm has its page.

The gallery (``docs/_ext/gallery.py``) generates a page per registered
algorithm, ``native`` excepted, at each docs build. These tests check, without
Sphinx or MPI:

- its list of pages is the registry's (every primitive x ``mpicoll.algorithms``
  but native), and every algorithm's docstring has the ``Cost:`` sentence the
  page and the cost table print;
- every algorithm's plans at the gallery's sizes record, match across ranks and
  complete under the diagram's model (what drawing needs);
- the pages written for the registry are all there, and a missing one is found;
- the examples of plans the pages print are what the code records today;
- every algorithm with a plan has its simulated scaling curve in the recorded sweep
  (``benchmarks/simulate/scaling.jsonl``), drawn from the file's rows;
- with ``MPICOLL_DOCS_HTML`` set to a built site (``.ci/run`` builds it first),
  every algorithm's HTML page is there with its two diagrams.
Serial pytest.
"""
import os
import subprocess
import sys

import pytest

import mpicoll

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "docs", "_ext"))

import gallery  # noqa: E402
import plandraw  # noqa: E402
import simcurves  # noqa: E402


def registered():
    return {(p, a) for p in mpicoll.PRIMITIVES for a in mpicoll.algorithms(p) if a != "native"}


def test_gallery_lists_every_registered_algorithm():
    pages = gallery.entries()
    assert len(pages) == len(set(pages))
    assert set(pages) == registered()
    assert all(a != "native" for _, a in pages)


@pytest.mark.parametrize("primitive,algorithm", sorted(registered()))
def test_every_algorithm_states_its_cost(primitive, algorithm):
    fn = mpicoll.algorithm_info(primitive, algorithm)
    assert gallery.cost_of(fn), f"{primitive} {algorithm}: no 'Cost:' sentence in its docstring"
    assert gallery.summary_of(fn)


@pytest.mark.parametrize("primitive,algorithm", sorted(registered()))
def test_every_algorithm_can_be_drawn(primitive, algorithm):
    from mpicoll.sched.inspect import plans_of
    if not gallery.has_plan(primitive, algorithm):
        # Only the algorithms that read peers' memory run without a plan; their page says so.
        assert getattr(mpicoll.algorithm_info(primitive, algorithm), "host_only", False)
        assert "No diagram" in gallery._page(primitive, algorithm, {}, {})
        return
    aware = gallery.is_node_aware(primitive, algorithm)
    for n in gallery.SIZES:
        layout = gallery.node_layout(n) if aware else None
        plans = plans_of(primitive, algorithm, n, gallery.COUNT, layout=layout)
        tl = plandraw.timeline(plans)
        assert tl.steps >= 1
        if primitive != "barrier":
            assert sum(m.elements for m in tl.messages) > 0


def test_written_gallery_has_every_page(tmp_path):
    failed = gallery.write(str(tmp_path), draw=False)
    assert failed == {}
    assert gallery.missing(str(tmp_path), images=False) == []
    p, a = sorted(registered())[0]
    os.remove(os.path.join(tmp_path, gallery.docname(p, a) + ".rst"))
    assert gallery.missing(str(tmp_path), images=False) == [(p, a, "no page")]
    # ... and without the diagrams, every page lacks them
    drawn = [(q, b) for q, b in registered() if gallery.has_plan(q, b) and (q, b) != (p, a)]
    sweep = simcurves.load()
    curves = sum(1 for q, b in drawn if sweep is not None and sweep.has(q, b))
    assert len(gallery.missing(str(tmp_path))) == 1 + len(gallery.SIZES) * len(drawn) + curves


def test_every_drawn_algorithm_has_its_simulated_curve(tmp_path):
    """The recorded sweep has every algorithm with a plan at two N or more; its page shows it.

    The curve's points are the file's rows (read here independently), and it draws.
    """
    from mpicoll.bench.results import load
    sweep = simcurves.load()
    assert sweep is not None, f"{simcurves.SOURCE} is missing"
    lacking = sorted((p, a) for p, a in registered()
                     if gallery.has_plan(p, a) and not sweep.has(p, a))
    assert lacking == [], f"no simulated curve in {simcurves.SOURCE}: {lacking}"
    _, rows, _ = load([os.path.join(ROOT, simcurves.SOURCE)])
    for p, a in (("allreduce", "ring"), ("bcast", "binomial"), ("alltoall", "pairwise")):
        for nbytes, pts in sweep.curves[(p, a)].items():
            want = sorted((r["nranks"], r["time_us"]["avg"]) for r in rows
                          if (r["primitive"], r["algorithm"], r["bytes"]) == (p, a, nbytes))
            assert pts == want
        page = gallery._page(p, a, {n: "drawn" for n in gallery.SIZES}, {}, sweep)
        assert f".. figure:: {simcurves.image_name(p, a)}" in page and sweep.platform in page
        path = tmp_path / simcurves.image_name(p, a)
        simcurves.draw(sweep, p, a, str(path))
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_timeline_matches_messages():
    """The model on a known plan: the ring allreduce at N = 4 is 2(N-1) steps of N messages."""
    from mpicoll.sched.inspect import plans_of
    tl = plandraw.timeline(plans_of("allreduce", "ring", 4, 12))
    assert tl.steps == 6
    assert len(tl.messages) == 24
    assert all(m.arrive == m.depart + 1 for m in tl.messages)
    assert all(m.dest == (m.source + 1) % 4 for m in tl.messages)
    assert len(tl.reduces) == 12


def test_timeline_rejects_unmatched_plans():
    from mpicoll.sched.inspect import plans_of
    plans = plans_of("bcast", "binomial", 4, 12)[:3] + plans_of("bcast", "linear", 4, 12)[3:]
    with pytest.raises(ValueError, match="rank 3 receives 1 message"):
        plandraw.timeline(plans)


def test_contributor_example_records_a_plan():
    """docs/examples/my_algo.py (the contributor's guide) registers and records at N = 1..5
    (in a subprocess: the registry of this process stays as it is).
    """
    code = (
        "import sys; sys.path[:0] = ['docs/examples', 'docs/_ext']\n"
        "import my_algo, plandraw\n"
        "from mpicoll.sched.inspect import plans_of, plan_of\n"
        "for n in range(1, 6):\n"
        "    tl = plandraw.timeline(plans_of('allreduce', 'star', n, 4))\n"
        "    assert len(tl.messages) == 2 * (n - 1), tl.summary()\n"
        "print(plan_of('allreduce', 'star', size=3, rank=0, count=4).describe()[:3])\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # the guide shows this output
    with open(os.path.join(ROOT, "docs", "contributing.rst"), encoding="utf-8") as f:
        assert out.stdout.strip() in f.read()


def test_how_it_works_example_is_current():
    """The plan shown in docs/how-it-works.rst is the one plan_of records today."""
    from mpicoll.sched.inspect import plan_of
    plan = plan_of("allreduce", "ring", size=4, rank=1, count=12)
    with open(os.path.join(ROOT, "docs", "how-it-works.rst"), encoding="utf-8") as f:
        text = f.read()
    assert repr(plan.describe()[:2]) in text
    assert repr(plan.traffic()) in text


def test_built_html_has_every_page():
    site = os.environ.get("MPICOLL_DOCS_HTML")
    if not site:
        pytest.skip("MPICOLL_DOCS_HTML is not set (.ci/run sets it after building the docs: "
                    "python -m sphinx -W --keep-going -b html docs build/docs)")
    lacking = []
    for p, a in sorted(registered()):
        page = os.path.join(site, gallery.docname(p, a) + ".html")
        if not os.path.isfile(page):
            lacking.append(f"{p} {a}: no {page}")
            continue
        with open(page, encoding="utf-8") as f:
            html = f.read()
        for image in gallery.image_names(p, a):
            if image not in html or not os.path.isfile(os.path.join(site, "_images", image)):
                lacking.append(f"{p} {a}: no {image}")
    assert not lacking, "gallery pages missing from the built site (rebuild the docs):\n" + \
        "\n".join(lacking)
