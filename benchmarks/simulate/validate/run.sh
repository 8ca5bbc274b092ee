#!/usr/bin/env bash
# Measured vs simulated on shaped links: one network-namespace cluster, one link rate.
#
#   benchmarks/simulate/validate/run.sh RATE BURST K HOSTS OUTDIR   (as root, from the repo root)
#   e.g. benchmarks/simulate/validate/run.sh 1gbit 2mbit 2 2 benchmarks/simulate/validate/1gbit-2x2
#
# 1. `scripts/netns_cluster.sh up HOSTS --rate RATE --burst BURST` (tbf on both ends of each
#    host's link; this kernel has no netem, so latency is the links' own, measured next);
# 2. ping-pong (pingpong.py): the one-way time between two ranks of one host and of two hosts, at
#    8 B and at 16 MiB (1 MiB within a host) -> the platform nodes:K=K with the node link's
#    lat = half the inter-host 8-byte time (a message crosses two links), bw = 16 MiB over its
#    time less the latency, and intra_lat / intra_bw from the same-host pair;
# 3. measured: `python -m mpicoll.bench PRIMITIVE -a all` for allreduce, bcast, allgather and
#    reduce_scatter on K x HOSTS ranks placed K per host (block), sizes SIZES;
# 4. simulated: `python -m mpicoll.bench simulate` of the same primitives, sizes and N on that
#    platform; 5. compare.py joins them (OUTDIR/table.md).
# SIZES (default 8,64K,1M,16M) and ITERS (default 10) may be set in the environment;
# MEASURE=0 keeps OUTDIR's measurements and platform and redoes steps 4-5 (no root needed).
set -euo pipefail
rate=$1 burst=$2 k=$3 nhosts=$4 out=$5
sizes=${SIZES:-8,64K,1M,16M}
iters=${ITERS:-10}
n=$((k * nhosts))
here=benchmarks/simulate/validate
mkdir -p "$out"
hosts=$(seq -s, -f "mpc-h%g:$k" 1 "$nhosts")
netns=scripts/netns_cluster.sh
if [[ ${MEASURE:-1} == 0 ]]; then
    platform=$(sed -n 's/^platform: //p' "$out/platform.txt")
else
$netns down >/dev/null 2>&1 || true
$netns up "$nhosts" --rate "$rate" --burst "$burst"
$netns mpiexec -hosts "mpc-h1:2,mpc-h2:1" -n 3 python $here/pingpong.py 8 1048576 16777216 \
    2>/dev/null | grep one_way > "$out/pingpong.jsonl"
platform=$(python - "$out/pingpong.jsonl" "$k" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
t = {(r["from"] == r["to"], r["bytes"]): r["one_way_us"] for r in rows}
lat = t[(False, 8)] / 2
bw = 16777216 / ((t[(False, 16777216)] - t[(False, 8)]) * 1e-6)
intra_bw = 1048576 / ((t[(True, 1048576)] - t[(True, 8)]) * 1e-6)
print(f"nodes:K={sys.argv[2]},bw={bw / 1e6:.1f}MBps,lat={lat:.2f}us,"
      f"intra_bw={intra_bw / 1e9:.2f}GBps,intra_lat={t[(True, 8)]:.2f}us")
PY
)
echo "platform: $platform" | tee "$out/platform.txt"
for prim in allreduce bcast allgather reduce_scatter; do
    $netns mpiexec -hosts "$hosts" -n "$n" python -m mpicoll.bench "$prim" -a all \
        --sizes "$sizes" -n "$iters" -w 2 -c 1 --progress off -J "$out/measured-$prim.jsonl" \
        > "$out/measured-$prim.txt" 2>&1
done
$netns down >/dev/null
fi
python -m mpicoll.bench simulate --primitive allreduce,bcast,allgather,reduce_scatter -a all \
    --ranks "$n" --sizes "$sizes" --platform "$platform" --progress off \
    -J "$out/simulated.jsonl" > "$out/simulated.txt" 2>&1
python $here/compare.py "$out/simulated.jsonl" "$out"/measured-*.jsonl | tee "$out/table.md"
