"""Summarize benchmarks/programs/*.txt (written by run.sh) as the tables of programs.md."""
import re
import statistics
import sys
from pathlib import Path

D = Path(__file__).resolve().parent
FACES = ("raw", "agree", "p2pcomm", "local", "persistent", "raw_nb", "nonblocking")
TORCH = ("inplace", "torch_pg", "torch", "torch_noop")


def rows(path, prefix=True):
    """Each line of ``path`` as (tag, n, {face: µs})."""
    out = []
    for line in path.read_text().splitlines():
        m = re.match(r"(\w+)\s+(\d+)\s+(.*)", line) if prefix else None
        tag, n, rest = (m.group(1), int(m.group(2)), m.group(3)) if m else ("new", 2, line)
        nums = re.findall(r"(?<![\w.])(\d+\.\d+)", rest.split("(")[0])
        faces = FACES + (TORCH if len(nums) > len(FACES) else ())
        out.append((tag, n, dict(zip(faces, map(float, nums), strict=False))))
    return out


def main():
    """Print the tables; 0."""
    lat = rows(D / "latency.txt")
    print("| N | version | " + " | ".join(FACES) + " |")
    print("|---|---|" + "---|" * len(FACES))
    for n in (2, 1):
        for tag in ("base", "new"):
            runs = [r for t, k, r in lat if t == tag and k == n]
            if not runs:
                continue
            med = {f: statistics.median(r[f] for r in runs) for f in FACES}
            print(f"| {n} | {tag} | " + " | ".join(f"{med[f]:.2f}" for f in FACES) + " |")
            if tag == "new":
                ratios = {f: med[f] / med["raw"] for f in ("agree", "p2pcomm", "local",
                                                             "persistent")}
                ratios["nonblocking"] = med["nonblocking"] / med["raw_nb"]
                print(f"| {n} | new, ratio | " + " | ".join(
                    f"{ratios[f]:.2f}x" if f in ratios else "" for f in FACES) + " |")
                print(f"| {n} | new, local - raw | {med['local'] - med['raw']:.2f} µs |")
    tl = rows(D / "torch_latency.txt", prefix=False)
    if tl:
        med = {f: statistics.median(r[f] for _, _, r in tl) for f in FACES + TORCH}
        print()
        print("| raw | inplace | torch_pg | torch | torch_noop | torch / (raw + torch_noop) |")
        print("|---|---|---|---|---|---|")
        print(f"| {med['raw']:.2f} | {med['inplace']:.2f} | {med['torch_pg']:.2f} | "
              f"{med['torch']:.2f} | {med['torch_noop']:.2f} | "
              f"{med['torch'] / (med['raw'] + med['torch_noop']):.2f}x |")
    for n in (2, 4):
        p = D / f"ddp_n{n}.txt"
        if p.exists():
            got = {}
            for line in p.read_text().splitlines():
                m = re.match(r"(\w+): .*\(([\d.]+) steps/s\)", line)
                if m:
                    got.setdefault(m.group(1), []).append(float(m.group(2)))
            mc, gl = got.get("mpicoll", []), got.get("gloo", [])
            if mc and gl:
                print(f"\nDDP N={n}: mpicoll {mc}, gloo {gl}, median ratio "
                      f"{statistics.median(mc) / statistics.median(gl):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
