"""The algorithm gallery: a page per registered algorithm, generated at every docs build.

For every primitive and every algorithm :func:`mpicoll.algorithms` lists for it
(``native``, the MPI library's own collective, excepted: it has no plan), the
page shows its space-time diagram at N = 4 and N = 5 drawn from its recorded
plans (:mod:`plandraw`), its cost (the ``Cost:`` sentence of its docstring)
and its docstring, and, where the recorded simulated sweep has it, its scaling
curve at cluster sizes (:mod:`simcurves`). The index holds the table of every
algorithm's cost and each primitive's ``auto`` rule (:data:`mpicoll.DEFAULTS_TABLE`),
so each fact is written once, in the code.

The pages and images are written into ``docs/gallery/`` (ignored by git)
when the builder starts; the directory is removed and rewritten each time.
``tests/test_docs.py`` checks that every registered algorithm has its page.
"""
import inspect
import os
import re
import shutil

__all__ = ["COUNT", "SIZES", "entries", "docname", "image_names", "node_layout", "cost_of",
           "summary_of", "notes_of", "write", "missing", "setup"]

#: Elements (of 8 bytes) per call drawn: each rank's vector, each block, or
#: reduce_scatter's total (see ``mpicoll.sched.inspect.call_arrays``). 192,000 bytes: enough
#: for bcast ``pipeline`` to cut 3 segments of 64 KiB; above ``hierarchical``'s 64 KiB
#: threshold, so it picks its bandwidth-bound inter algorithm.
COUNT = 24000
ITEMSIZE = 8
#: Numbers of ranks drawn.
SIZES = (4, 5)
DIR = "gallery"


def entries():
    """``[(primitive, algorithm)]`` of every registered algorithm but ``native``.

    In registry order: the pages the gallery has.
    """
    import mpicoll
    return [(p, a) for p in mpicoll.PRIMITIVES for a in mpicoll.algorithms(p) if a != "native"]


def docname(primitive, algorithm):
    """The page of an algorithm, relative to the docs' source directory (no suffix)."""
    return f"{DIR}/{primitive}/{algorithm}"


def image_names(primitive, algorithm):
    """The diagram files of an algorithm's page, beside the page: one per size.

    Names are unique over the gallery, as Sphinx copies every image into one ``_images``
    folder; none for an algorithm without a plan (:func:`has_plan`).
    """
    if not has_plan(primitive, algorithm):
        return []
    return [f"{primitive}-{algorithm}-n{n}.png" for n in SIZES]


def is_node_aware(primitive, algorithm):
    import mpicoll
    return mpicoll.algorithm_info(primitive, algorithm).__module__.endswith(".hierarchical")


def node_layout(size):
    """The two-node layout node-aware algorithms are drawn on.

    The first ⌈N/2⌉ ranks on node 0, the others on node 1 (``MPICOLL_NODES=2,2`` at
    N = 4, ``3,2`` at N = 5).
    """
    from mpicoll.core.topology import Layout
    first = (size + 1) // 2
    spec = f"{first},{size - first}"
    return Layout([0] * first + [1] * (size - first), f"MPICOLL_NODES={spec}")


def _text(fn):
    return " ".join((inspect.getdoc(fn) or "").split())


def cost_of(fn):
    """The ``Cost:`` sentence of an algorithm's docstring (without the word), or None."""
    m = re.search(r"Cost:\s*(.*?)(?<!\.)\.(?!\.)(?=\s|$)", _text(fn))
    return m.group(1).strip() if m else None


def summary_of(fn):
    """The first sentence of an algorithm's docstring."""
    text = _text(fn)
    m = re.search(r"^(.*?)(?<!\.)\.(?!\.)(?=\s|$)", text)
    return (m.group(1) if m else text).strip()


def notes_of(fn):
    """What the docstring says after its ``Cost:`` sentence, to the end of that paragraph.

    That is when the algorithm wins, its limits; "" when nothing.
    """
    for para in (inspect.getdoc(fn) or "").split("\n\n"):
        text = " ".join(para.split())
        m = re.search(r"Cost:\s*(.*?)(?<!\.)\.(?!\.)(?=\s|$)", text)
        if m:
            return text[m.end():].strip()
    return ""


def _escape(text):
    """Plain text for reStructuredText (costs carry no markup)."""
    return re.sub(r"([\\`*_|])", r"\\\1", text)


def _target(fn):
    return f"{fn.__module__}.{fn.__qualname__}"


def has_plan(primitive, algorithm):
    """False for an algorithm that runs directly instead of recording a plan.

    (The shm ones read their peers' memory.) It has no diagram, and its page says so.
    """
    from mpicoll.core.errors import NotSchedulable
    from mpicoll.sched.inspect import plan_of
    try:
        plan_of(primitive, algorithm, SIZES[0], 0, COUNT, itemsize=ITEMSIZE,
                layout=node_layout(SIZES[0]) if is_node_aware(primitive, algorithm) else None)
    except NotSchedulable:
        return False
    return True


def _module_of(primitive):
    """The module of ``mpicoll.coll`` that holds a primitive's flat algorithms."""
    import mpicoll
    names = mpicoll.algorithms(primitive)
    fn = mpicoll.algorithm_info(primitive, "native" if "native" in names else names[0])
    return fn.__module__


def _title(text, ch="="):
    return f"{text}\n{ch * len(text)}\n"


def _page(primitive, algorithm, captions, problems, simulated=None):
    import mpicoll
    fn = mpicoll.algorithm_info(primitive, algorithm)
    cost = cost_of(fn)
    lines = [f".. _gallery-{primitive}-{algorithm}:", "", _title(f"{primitive}: {algorithm}")]
    use = f'``mpicoll.{primitive}(..., algorithm="{algorithm}")``'
    if primitive == "reduce_scatter":
        use = (f'``mpicoll.reduce_scatter(..., algorithm="{algorithm}")`` '
               '(and ``reduce_scatter_block``)')
    facts = [use]
    if getattr(fn, "commutative_only", False):
        facts.append("commutative ops only")
    lines += [" · ".join(facts), ""]
    lines += [f"**Cost:** {_escape(cost) if cost else '(no Cost: line in its docstring)'}", ""]
    if is_node_aware(primitive, algorithm):
        shown = "; ".join(f"N = {n}: {node_layout(n).describe()}" for n in SIZES)
        lines += ["Drawn on two nodes (" + shown + "). Red arrows cross nodes; the "
                  "inter algorithm is the default for this message size.", ""]
    images = image_names(primitive, algorithm)
    if not images:
        lines += ["*No diagram*: this algorithm records no plan of messages. It runs "
                  "directly on the call's arrays, reading its peers' memory on the node "
                  "(:mod:`mpicoll.device.peer_memory`), synchronised by node barriers; "
                  "``mpicoll.traffic()`` counts what it reads.", ""]
    # (no images for an algorithm without a plan: then no sizes are listed)
    for n, image in zip(SIZES, images, strict=False):
        if n in problems:
            lines += [f"*N = {n}: no diagram* ({_escape(problems[n])}).", ""]
            continue
        lines += [f".. figure:: {image}", f"   :alt: space-time diagram of {primitive} "
                  f"{algorithm} at N = {n}", "", f"   N = {n}: {captions[n]}.", ""]
    if simulated is not None and simulated.has(primitive, algorithm):
        import simcurves
        sizes = sorted(simulated.curves[(primitive, algorithm)])
        ns = sorted({n for pts in simulated.curves[(primitive, algorithm)].values()
                     for n, _ in pts})
        lines += [_title("Simulated at scale", "-"),
                  f".. figure:: {simcurves.image_name(primitive, algorithm)}",
                  f"   :alt: simulated time of {primitive} {algorithm} against N", "",
                  f"   Time per call at N = {', '.join(map(str, ns))} "
                  f"({', '.join(f'{b:,} B' for b in sizes)}), replayed by SimGrid/SMPI from "
                  f"its verified plans on ``{simulated.platform}``; dashed: MPICH's own "
                  f"algorithms as SMPI runs them. Recorded in ``{simcurves.SOURCE}``; "
                  "see :doc:`/guide/simulate`.", ""]
    lines += [f"See :doc:`the gallery's index <../index>` for how the diagrams are drawn "
              f"and :doc:`index` for {primitive}'s other algorithms.", "",
              _title("Docstring", "-"), f".. autofunction:: {_target(fn)}", ""]
    return "\n".join(lines)


def _primitive_page(primitive, algos, seen_modules):
    import mpicoll
    mod = _module_of(primitive)
    lines = [f".. _gallery-{primitive}:", "", _title(primitive)]
    rule = mpicoll.DEFAULTS_TABLE.get(primitive)
    if rule:
        lines += [f"``auto`` picks: {_escape(rule)} (when the measured tuning table has no "
                  f"entry; :ref:`choosing`).", ""]
    lines += [".. toctree::", "   :maxdepth: 1", ""]
    lines += [f"   {a}" for a in algos] + [""]
    lines += [f".. automodule:: {mod}"]
    if mod in seen_modules:
        lines += ["   :no-index:"]
    seen_modules.add(mod)
    return "\n".join(lines) + "\n"


def _cost_table(by_primitive):
    import mpicoll
    lines = []
    for p, algos in by_primitive.items():
        lines += [_title(p, "-")]
        rule = mpicoll.DEFAULTS_TABLE.get(p)
        lines += [f":doc:`{p}/index`" + (f" · ``auto``: {_escape(rule)}" if rule else ""), ""]
        lines += [".. list-table::", "   :header-rows: 1", "   :widths: 16 40 44", "",
                  "   * - algorithm", "     - cost", "     - what it does; when it wins, limits"]
        for a in algos:
            fn = mpicoll.algorithm_info(p, a)
            cost = cost_of(fn)
            mark = " (commutative ops only)" if getattr(fn, "commutative_only", False) else ""
            lines += [f"   * - :doc:`{a} <{p}/{a}>`",
                      f"     - {_escape(cost) if cost else '—'}",
                      f"     - {summary_of(fn)}. {notes_of(fn)}{mark}".rstrip()]
        lines.append("")
    return "\n".join(lines)


def _draw_all(out, primitive, algorithm, draw=True):
    """Draw an algorithm's diagrams into ``out``; returns (captions, problems) by size."""
    import plandraw

    from mpicoll.sched.inspect import plans_of
    captions, problems = {}, {}
    aware = is_node_aware(primitive, algorithm)
    for n, image in zip(SIZES, image_names(primitive, algorithm), strict=False):
        layout = node_layout(n) if aware else None
        try:
            plans = plans_of(primitive, algorithm, n, COUNT, itemsize=ITEMSIZE, layout=layout)
            tl = plandraw.timeline(plans)
        except Exception as exc:      # reported as a build warning, and on the page
            problems[n] = f"{type(exc).__name__}: {exc}"
            continue
        captions[n] = tl.summary()
        if draw:
            plandraw.draw(tl, os.path.join(out, image), layout=layout,
                          title=f"{primitive} {algorithm}, N = {n}")
    return captions, problems


def write(srcdir, draw=True):
    """(Re)write the gallery under ``srcdir``/gallery; ``{docname: problems}``.

    The problems are those of pages whose diagrams could not be drawn (empty when all were).
    """
    import plandraw  # noqa: F401  (fail early when the module is missing)
    import simcurves
    sweep = simcurves.load()
    root = os.path.join(srcdir, DIR)
    if os.path.isdir(root):
        shutil.rmtree(root)
    os.makedirs(root)
    by_primitive = {}
    for p, a in entries():
        by_primitive.setdefault(p, []).append(a)
    failed = {}
    seen_modules = set()
    for p, algos in by_primitive.items():
        pdir = os.path.join(root, p)
        os.makedirs(pdir)
        with open(os.path.join(pdir, "index.rst"), "w", encoding="utf-8") as f:
            f.write(_primitive_page(p, algos, seen_modules))
        for a in algos:
            captions, problems = _draw_all(pdir, p, a, draw)
            if problems:
                failed[docname(p, a)] = problems
            if draw and sweep is not None and sweep.has(p, a):
                simcurves.draw(sweep, p, a, os.path.join(pdir, simcurves.image_name(p, a)))
            with open(os.path.join(pdir, f"{a}.rst"), "w", encoding="utf-8") as f:
                f.write(_page(p, a, captions, problems, sweep))
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "gallery_intro.rst"),
              encoding="utf-8") as f:
        intro = f.read()
    with open(os.path.join(root, "index.rst"), "w", encoding="utf-8") as f:
        f.write(intro.replace("@COUNT@", f"{COUNT:,}").replace("@BYTES@", f"{COUNT * ITEMSIZE:,}"))
        f.write("\n.. toctree::\n   :hidden:\n\n")
        f.write("".join(f"   {p}/index\n" for p in by_primitive))
        f.write("\n" + _cost_table(by_primitive))
    return failed


def missing(srcdir, images=True):
    """``[(primitive, algorithm, what)]``: algorithms whose gallery page is missing.

    Every registered algorithm but native whose page (or, with ``images``, one of its
    diagrams) is missing under ``srcdir``.
    """
    import simcurves
    sweep = simcurves.load() if images else None
    out = []
    for p, a in entries():
        page = os.path.join(srcdir, docname(p, a) + ".rst")
        if not os.path.isfile(page):
            out.append((p, a, "no page"))
            continue
        simulated = [simcurves.image_name(p, a)] if sweep and sweep.has(p, a) else []
        for image in image_names(p, a) + simulated if images else ():
            if not os.path.isfile(os.path.join(os.path.dirname(page), image)):
                out.append((p, a, f"no {image}"))
    return out


def _generate(app):
    from sphinx.util import logging
    log = logging.getLogger(__name__)
    failed = write(app.srcdir)
    for doc, problems in failed.items():
        for n, why in problems.items():
            log.warning(f"gallery: {doc}: no diagram at N = {n}: {why}")


def setup(app):
    """Generate the gallery when the builder starts."""
    app.connect("builder-inited", _generate)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
