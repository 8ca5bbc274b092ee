"""The ring allreduce step by step: ``allreduce_ring``'s schedule as a text grid or a picture.

The model replays the schedule of :func:`mpicoll.coll.allreduce.allreduce_ring`
(chunks from :func:`split`; in reduce-scatter step s rank r sends chunk
r - s and reduces the chunk r - s - 1 arriving from its left neighbour; in
allgather step s it sends chunk r + 1 - s and stores chunk r - s), keeping
for every rank and chunk the set of ranks whose data the chunk holds and its
values. The demo checks the model's final vectors against a real run.
"""
import numpy as np

from ..core.blocks import offsets, split

__all__ = ["ring_steps", "RingModel", "grid_text", "plot_ring"]


def ring_steps(n):
    """The 2(N-1) steps: ``(phase, s, [(rank, sent_chunk, received_chunk), ...])``."""
    steps = [("reduce-scatter", s, [(r, (r - s) % n, (r - s - 1) % n) for r in range(n)])
             for s in range(n - 1)]
    steps += [("allgather", s, [(r, (r + 1 - s) % n, (r - s) % n) for r in range(n)])
              for s in range(n - 1)]
    return steps


class RingModel:
    """Replays the ring on every rank's data; ``states`` holds one snapshot per step."""

    def __init__(self, data):
        self.n = n = len(data)
        self.sizes = split(len(data[0]), n)
        self.off = offsets(self.sizes)
        self.values = [np.array(d, copy=True) for d in data]
        self.holds = [[{r} for _ in range(n)] for r in range(n)]
        self.states = [("start", None, None, self._counts())]
        for phase, s, moves in ring_steps(n):
            self._step(phase, moves)
            self.states.append((phase, s, moves, self._counts()))

    def chunk(self, rank, c):
        """Chunk ``c`` of rank ``rank``'s current values."""
        return self.values[rank][self.off[c]:self.off[c + 1]]

    def _counts(self):
        return [[len(h) for h in row] for row in self.holds]

    def _step(self, phase, moves):
        n = self.n
        before = [[set(h) for h in row] for row in self.holds]
        sent = {}
        for rank, sc, _ in moves:          # all sends of a step happen at once
            sent[(rank + 1) % n] = (sc, self.chunk(rank, sc).copy(), before[rank][sc])
        for rank, _, rc in moves:
            sc, vals, who = sent[rank]
            assert sc == rc, "the left neighbour sends the chunk this rank expects"
            if phase == "reduce-scatter":
                self.chunk(rank, rc)[...] += vals
                self.holds[rank][rc] |= who
            else:
                self.chunk(rank, rc)[...] = vals
                self.holds[rank][rc] = set(who)


def grid_text(model, arrows=False):
    """The ring's steps as text: per step, per rank, what it sends, receives and holds."""
    n = model.n
    right, left = ("→", "←") if arrows else ("->", "<-")
    w = max(4, len(str(n)) + 2)
    head = "".join(f"c{c}".rjust(w) for c in range(n))
    lines = [f"chunks c0..c{n - 1} of {','.join(map(str, model.sizes))} elements "
             f"(split: the first K % N one larger)",
             f"cell = number of ranks whose data the chunk holds ({n} = complete); "
             f"'>' sent to the right, '+' received and added, '=' received and stored"]
    total = len(model.states) - 1

    def desc(r, sc, rc):
        return f"sends c{sc} {right} {(r + 1) % n}, gets c{rc} {left} {(r - 1) % n}"
    dw = max([len(desc(r, n - 1, n - 1)) for r in range(n)] + [0])
    rw = len(str(n - 1))
    for i, (phase, s, moves, counts) in enumerate(model.states):
        if phase == "start":
            title = "start"
        else:
            title = f"step {i}/{total}: {phase} {s + 1}/{n - 1}"
        lines.append(f"  {title:<{dw + rw + 9}}{head}")
        for r in range(n):
            marks = [""] * n
            what = ""
            if moves is not None:
                _, sc, rc = moves[r]
                marks[sc] += ">"
                marks[rc] += "+" if phase == "reduce-scatter" else "="
                what = desc(r, sc, rc)
            cells = "".join(f"{counts[r][c]}{marks[c]}".rjust(w) for c in range(n))
            lines.append(f"    rank {r:<{rw}}  {what:<{dw}}{cells}")
        if phase == "reduce-scatter" and s == n - 2:
            owned = ", ".join(f"rank {r}: c{(r + 1) % n}" for r in range(n))
            lines.append(f"    after reduce-scatter each rank holds one complete chunk ({owned})")
    return "\n".join(lines)


def plot_ring(model, path):
    """Draw every step of the ring, a ranks x chunks heat map, into ``path`` (needs matplotlib)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    n = model.n
    states = model.states
    cols = min(len(states), 4)
    rows = (len(states) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.0 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, (phase, s, moves, counts) in zip(axes.flat, states, strict=False):
        ax.axis("on")
        ax.imshow(np.array(counts), cmap="Oranges", vmin=0, vmax=n)
        for r in range(n):
            for c in range(n):
                ax.text(c, r, str(counts[r][c]), ha="center", va="center",
                        color="white" if counts[r][c] == n else "black", fontsize=9)
            if moves is not None:
                _, sc, rc = moves[r]
                ax.add_patch(Rectangle((sc - 0.5, r - 0.5), 1, 1, fill=False, ec="tab:blue", lw=2))
                ax.add_patch(Rectangle((rc - 0.45, r - 0.45), 0.9, 0.9, fill=False,
                                       ec="tab:green", lw=2, ls="--"))
        title = "start" if phase == "start" else f"{phase} {s + 1}/{n - 1}"
        ax.set_title(title, fontsize=10)
        ax.set_xticks(range(n), [f"c{c}" for c in range(n)])
        ax.set_yticks(range(n), [f"rank {r}" for r in range(n)])
    fig.suptitle(f"ring allreduce, N = {n}: chunks held per rank "
                 f"(blue: sent right, green dashed: received)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
