"""Read a cost's text as a formula: the docstring notation, evaluated.

``terms(cost, k)`` evaluates the text of a :class:`~mpicoll.coll.cost.Cost`
(as its docstring writes it: ``⌈log2 p⌉(α + nβ + nγ), plus 2(α + nβ) + nγ
when N ≠ p``) at a :class:`~mpicoll.coll.cost.Call` and returns its α, β and
γ coefficients, so that a test can hold the text and the declared functions
to each other. The notation: numbers, the symbols N, n, p, m, root and those
the cost's ``where`` defines, α β γ, ⌈log2 x⌉ and ⌊log2 x⌋, + - / · ^ and
juxtaposition for products, max/min, and clauses ``, plus X when C`` whose
condition C is ``A ≠ B``, ``the op does not commute`` or a ``where`` name,
joined by ``and``.
"""
import re

from mpicoll.coll.cost import flg, lg

__all__ = ["terms", "python_of", "FormulaError"]


class FormulaError(ValueError):
    """A text the notation does not cover."""


# Symbols are single letters (juxtaposed: "Nn" is N·n) or words with an underscore (m_root).
_TOKEN = re.compile(r"\s*(\d+|⌈log2|⌊log2|⌉|⌋|max|min|root_folded|root|[A-Za-z]_[A-Za-z0-9]+|"
                    r"[A-Za-z]|[αβγ]|[()+\-/·^,])")
_OPERAND_END = re.compile(r"^(\d+|[A-Za-z][A-Za-z_0-9]*|[αβγ]|\)|⌉|⌋)$")
_OPERAND_START = re.compile(r"^(\d+|[A-Za-z][A-Za-z_0-9]*|[αβγ]|\(|⌈log2|⌊log2)$")
_NAMES = {"α": "_a", "β": "_b", "γ": "_g", "⌈log2": "lg(", "⌊log2": "flg(", "⌉": ")",
          "⌋": ")", "·": "*", "^": "**"}
_PHRASES = {"the op does not commute": "(not commutative)", "the root is folded": "root_folded"}


def _expr(text):
    pos, toks = 0, []
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise FormulaError(f"cannot read {text[pos:]!r} in {text!r}")
        toks.append(m.group(1))
        pos = m.end()
    out = []
    for i, t in enumerate(toks):
        if i and _OPERAND_END.match(toks[i - 1]) and _OPERAND_START.match(t) \
                and toks[i - 1] not in ("max", "min"):
            out.append("*")
        out.append(_NAMES.get(t, t))
    return "".join(out)


def _cond(text):
    text = text.strip()
    for phrase, py in _PHRASES.items():
        text = text.replace(phrase, py)
    parts = [p.strip() for p in text.split(" and ")]
    out = []
    for p in parts:
        if "≠" in p:
            a, b = p.split("≠")
            out.append(f"({_expr(a)}) != ({_expr(b)})")
        elif p.startswith("("):
            out.append(p)
        else:
            out.append(f"bool({_expr(p)})")
    return " and ".join(out)


def python_of(text):
    """The text as a Python expression of _a, _b, _g and the symbols."""
    pieces = text.split(", plus ")
    py = [f"({_expr(pieces[0])})"]
    for piece in pieces[1:]:
        if " when " not in piece:
            raise FormulaError(f"', plus' without 'when' in {text!r}")
        what, _, cond = piece.partition(" when ")
        py.append(f"(({_expr(what)}) if ({_cond(cond)}) else 0)")
    return " + ".join(py)


def terms(cost, k):
    """(α, β, γ) coefficients of ``cost.text`` at ``k`` (β and γ per element)."""
    ns = {"lg": lg, "flg": flg, "max": max, "min": min, "N": k.N, "n": k.n, "p": k.p,
          "root": k.root, "commutative": k.commutative}
    if k.counts is not None and k.counts and not isinstance(k.counts[0], list):
        ns["m"] = sum(k.counts)
    for name, fn in cost.where.items():
        ns[name] = fn(k)
    code = compile(python_of(cost.text), "<cost>", "eval")
    out = []
    for a, b, g in ((1, 0, 0), (0, 1, 0), (0, 0, 1)):
        ns.update(_a=a, _b=b, _g=g)
        out.append(eval(code, {"__builtins__": {}, "bool": bool}, ns))
    return tuple(out)
