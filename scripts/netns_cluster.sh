#!/usr/bin/env bash
# A cluster on one machine: K "hosts" that are Linux network namespaces on a private bridge, for
# running MPI jobs (and Slurm jobs) that really span several nodes - node-aware algorithms,
# layout detection, intra- vs inter-node traffic - without a second machine.
#
#   scripts/netns_cluster.sh up 3 [--rate 1gbit [--burst 2mbit]]  # mpc-h1..mpc-h3 = 10.77.0.11..13
#   scripts/netns_cluster.sh mpiexec -hosts mpc-h1:2,mpc-h2:2 -n 4 python tests/support/netns_probe.py
#   scripts/netns_cluster.sh exec mpc-h2 ip -br addr      # a command inside one host
#   scripts/netns_cluster.sh slurm up                     # slurmctld + one slurmd per host
#   eval "$(scripts/netns_cluster.sh slurm env)"; sbatch -N 2 jobs/bench_cpu.sh
#   scripts/netns_cluster.sh status
#   scripts/netns_cluster.sh down                         # everything below goes away
#
# What `up K` creates (and `down` removes; `down` is safe when nothing is up):
#   - bridge mpcbr0 with 10.77.0.1/24 in the root namespace;
#   - network namespaces mpc-h1 .. mpc-hK, each with loopback up and one veth pair: `mpc-vI` on the
#     bridge (root side), `eth0` inside with 10.77.0.(10+I)/24;
#   - a UTS namespace per host with hostname mpc-hI (a bind mount on $MPICOLL_NETNS_DIR/uts/mpc-hI),
#     entered by `exec`, hydra's launches and the slurmds: `hostname` and MPI_Get_processor_name
#     say mpc-hI, and Slurm can resolve the host name a client sends it (see below);
#   - --rate RATE (e.g. 10gbit, 800mbit): `tc qdisc ... root tbf rate RATE burst BURST latency
#     50ms` on BOTH ends of every veth: `eth0` in the namespace limits what host I sends, `mpc-vI`
#     on the bridge limits what host I receives (so each direction of each link is shaped).
#     --burst BURST defaults to 256kbit, which is too small for tbf to reach RATE at gigabit
#     speeds (measured, 4 MiB ping-pong: --rate 1gbit gave ~0.5 Gbit/s with burst 256kbit and
#     1.0 Gbit/s with --burst 2mbit); about RATE x 2 ms (1gbit: 2mbit) gives the nominal rate, a
#     much larger burst lets messages of that size through unshaped;
#   - lines "10.77.0.(10+I) mpc-hI" (and "10.77.0.1 mpc-h0", the bridge) in /etc/hosts, between
#     the markers "# >>> mpicoll netns_cluster" and "# <<< mpicoll netns_cluster";
#   - the state directory MPICOLL_NETNS_DIR (default /tmp/mpicoll-netns): hosts, rate, Slurm files.
# `slurm up` adds slurmctld (root namespace, listening on 10.77.0.1:PORT) and one slurmd per
# namespace (NodeName=mpc-hI NodeAddr=10.77.0.(10+I)), all files under $MPICOLL_NETNS_DIR/slurm;
# `slurm down` (and `down`) cancel the jobs and stop the daemons by their PID files. `down` also
# ends processes still running inside the namespaces (ranks of a killed job), by PID.
#
# Other commands:
#   exec HOST CMD...     run CMD in namespace HOST (a name mpc-hI or its address); like ssh, the
#                        words are joined and run by `bash -c`. Also hydra's launcher: hydra runs
#                        `LAUNCHER_EXEC -x HOST CMD...`, so a first argument starting with "-" means
#                        exec (leading dash options are dropped).
#   mpiexec|run ARGS...  the venv's hydra mpiexec with -launcher ssh -launcher-exec <this script>
#                        -iface mpcbr0, plus -genv UCX_TLS tcp,self unless UCX_TLS is set, plus
#                        -hosts mpc-h1,..,mpc-hK if ARGS name no hosts; the full command is printed
#                        on stderr. MPICOLL_NETNS_MPIEXEC picks another (hydra) mpiexec.
#   slurm up|down|status|env
#   status               what is up (exit 1 when nothing is)
#
# Settings (environment):
#   MPICOLL_NETNS_DIR          state directory                          (/tmp/mpicoll-netns)
#   MPICOLL_NETNS_MPIEXEC      hydra mpiexec for `mpiexec`       (the active venv's, else .venv's)
#   MPICOLL_NETNS_SLURM_PORT   slurmctld port; every slurmd uses PORT+1     (16917)
#   MPICOLL_NETNS_SLURM_CPUS   CPUs each Slurm node advertises              (4)
#
# Requirements: root (CAP_NET_ADMIN/CAP_SYS_ADMIN) and a kernel with network namespaces, veth
# and bridge (`ip netns add` must work; tbf for --rate); iproute2 (`ip`, `tc`); for `slurm`,
# Debian's slurmctld/slurmd/slurm-client (22.05; see scripts/local_slurm.sh, which can install
# them). Without root or without namespace support every command that needs them exits with
# code 77 and a message saying why. One cluster per machine: the names (mpc-h*, mpcbr0) and the
# subnet 10.77.0.0/24 are fixed; `up` refuses to start if 10.77.0.0/24 is routed elsewhere.
#
# Facts this relies on (checked on Debian 12, kernel 6.x, MPICH 5.0.2 wheel, slurm-wlm 22.05):
#   - hydra (`-launcher ssh -launcher-exec X`) runs `X -x HOST '"/path/hydra_pmi_proxy"' ARGS...`:
#     the words are a shell command, hence `bash -c "$*"`; `ip netns exec` execs it, so the
#     launcher process IS the proxy (hydra's kill and MPIEXEC_TIMEOUT reach it; hydra puts each
#     proxy in a session of its own, but proxies and ranks end within a second when mpiexec is
#     killed, and `down` ends anything left inside a namespace). Without `-iface mpcbr0` the
#     launch fails ("Launch proxy failed"): `-iface mpcbr0`
#     makes mpiexec advertise 10.77.0.1 as its control address (its own hostname resolves to
#     127.0.0.1, which inside a namespace is the namespace's own loopback). Hydra treats every
#     HOST as one node: Split_type(COMM_TYPE_SHARED) groups the ranks of one namespace.
#   - The MPICH wheel's netmod is ch4:ucx, and UCX decides that two processes are on one machine
#     from the kernel's boot id, which all namespaces share: left alone it moves "inter-node"
#     messages through shared memory (1 KiB ping-pong ~3 us, nothing on the veths).
#     UCX_TLS=tcp,self forces TCP over the veths between nodes (~20 us); MPICH's own shared
#     memory still serves ranks of one namespace. `mpiexec` sets it with -genv; the Slurm cluster
#     sets it in a TaskProlog (both only when UCX_TLS is not set already).
#   - `ip netns exec` also unshares the mount namespace and remounts /sys; /dev/shm, /tmp and the
#     rest of the file system stay shared, so one venv and one checkout serve every host. The
#     remounted /sys has no /sys/fs/cgroup, without which slurmd 22.05 will not start: the
#     slurmds are started with `nsenter --net=/run/netns/mpc-hI --uts=...` (no mount namespace).
#   - Slurm contacts srun back by the host NAME srun sends (`step_ctx_create_timeout`: when a job
#     step must wait for the previous step's CPUs, slurmctld wakes srun up at NAME:port). With
#     one shared hostname (here `vm` = 127.0.0.1) that message went to the root namespace's
#     loopback and srun slept on for minutes (seen: 1 job in ~30 with two srun steps in a row);
#     hence a hostname per namespace, and /etc/hosts entries that resolve it to its own address.
#   - Slurm: slurmd started inside a namespace with `-N mpc-hI` serves that node; jobs' tasks
#     inherit its namespace; srun (in the batch script, inside mpc-h1) reaches slurmctld and the
#     other slurmds over the bridge. MpiDefault stays none (as in local_slurm.sh): job scripts
#     must say `srun --mpi=pmi2` (the MPICH wheel's PMI under srun); `mpiexec` inside a job works
#     too (hydra starts its proxies through srun). The TaskProlog runs for the batch script as
#     well as for srun's tasks. `sbatch -N 2 jobs/bench_cpu.sh` ran to the end across mpc-h1/h2.
#   - Everyone on the machine still shares the CPUs (2 cores here): timings of "inter-node"
#     traffic include the kernel's TCP stack and the veths, not a real network; the kernel here
#     has no netem (no added delay/loss), only tbf/htb rate limits.
set -eEuo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
ROOT=$(dirname "$(dirname "$SELF")")
DIR=${MPICOLL_NETNS_DIR:-/tmp/mpicoll-netns}
BR=mpcbr0
NET=10.77.0
PREFIX=mpc-h
VETH=mpc-v
INNER=eth0
SPORT=${MPICOLL_NETNS_SLURM_PORT:-16917}
SCPUS=${MPICOLL_NETNS_SLURM_CPUS:-4}
SDIR=$DIR/slurm
SCONF=$SDIR/etc/slurm.conf
HOSTS_FILE=/etc/hosts
MARK_BEGIN="# >>> mpicoll netns_cluster (scripts/netns_cluster.sh; removed by its 'down') >>>"
MARK_END="# <<< mpicoll netns_cluster <<<"
UNSUPPORTED=77

say() { printf 'netns_cluster: %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }
unsupported() { say "UNSUPPORTED: $*"; exit "$UNSUPPORTED"; }

host_ip() { echo "$NET.$((10 + ${1#"$PREFIX"}))"; }   # host_ip mpc-h3 -> 10.77.0.13

need_root() {
    [[ $(id -u) == 0 ]] || unsupported "needs root (network namespaces, veths, a bridge: CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    command -v ip >/dev/null || unsupported "no \`ip\` command (install iproute2)"
}

need_netns() {  # root, and a throwaway namespace can be made and removed
    need_root
    local probe=mpc-probe-$$ err
    if ! err=$(ip netns add "$probe" 2>&1); then
        unsupported "this kernel/container cannot create network namespaces (\`ip netns add\`: $err)"
    fi
    ip netns del "$probe" 2>/dev/null || true
}

# The namespaces that exist now, in host order.
current_hosts() {
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}[0-9]+\$" | sort -t h -k 2 -n || true
}

is_up() { [[ -n $(current_hosts) ]] || ip link show "$BR" >/dev/null 2>&1; }

# --- /etc/hosts --------------------------------------------------------------------------------
hosts_remove() {
    [[ -w $HOSTS_FILE ]] && grep -qF "$MARK_BEGIN" "$HOSTS_FILE" || return 0
    local tmp
    tmp=$(mktemp)
    awk -v b="$MARK_BEGIN" -v e="$MARK_END" '$0 == b {skip = 1; next} $0 == e {skip = 0; next} !skip' \
        "$HOSTS_FILE" >"$tmp"
    # Rewrite in place (not mv): /etc/hosts is often a bind mount in containers.
    cat "$tmp" >"$HOSTS_FILE"
    rm -f "$tmp"
}

hosts_add() {  # hosts_add K
    hosts_remove
    [[ -w $HOSTS_FILE ]] || { say "note: $HOSTS_FILE is not writable: host names will not resolve (MPI does not need them)"; return 0; }
    {
        echo "$MARK_BEGIN"
        echo "$NET.1 ${PREFIX}0"
        local i
        for ((i = 1; i <= $1; i++)); do echo "$(host_ip "$PREFIX$i") $PREFIX$i"; done
        echo "$MARK_END"
    } >>"$HOSTS_FILE"
}

# --- host names: one UTS namespace per host ------------------------------------------------------
# A persistent UTS namespace per host (a bind mount on $DIR/uts/HOST) whose hostname is HOST:
# processes started by `exec`, hydra and the slurmds see `hostname` = mpc-hI, and a name they
# hand to slurmctld resolves (through /etc/hosts) to their own address.
uts_add() {
    command -v unshare >/dev/null || { say "note: no unshare (util-linux): every host keeps the name $(hostname)"; return 0; }
    : >"$DIR/uts/$1"
    unshare --uts="$DIR/uts/$1" hostname "$1"
}

uts_of() { mountpoint -q "$DIR/uts/$1" 2>/dev/null && echo "--uts=$DIR/uts/$1"; return 0; }

uts_remove() {
    local f
    for f in "$DIR"/uts/*; do
        [[ -e $f ]] || continue
        umount "$f" 2>/dev/null || umount -l "$f" 2>/dev/null || true
    done
}

# --- up / down ---------------------------------------------------------------------------------
cmd_up() {
    local k="" rate="" burst=256kbit
    while (($#)); do
        case $1 in
            --rate) rate=${2:?--rate needs a value, e.g. 10gbit}; shift 2 ;;
            --rate=*) rate=${1#--rate=}; shift ;;
            --burst) burst=${2:?--burst needs a value, e.g. 2mbit}; shift 2 ;;
            --burst=*) burst=${1#--burst=}; shift ;;
            *) [[ -z $k ]] || die "up: unexpected argument '$1'"; k=$1; shift ;;
        esac
    done
    if ! [[ $k =~ ^[1-9][0-9]*$ ]] || ((k > 200)); then die "up K: K must be a host count 1..200 (got '${k}')"; fi
    [[ -z $rate || $rate =~ ^[0-9]+(\.[0-9]+)?([kmgt]?(bit|bps))$ ]] \
        || die "--rate $rate: expected a tc rate such as 10gbit, 800mbit, 1gbps"
    [[ $burst =~ ^[0-9]+(\.[0-9]+)?([kmg]?(bit|b))$ ]] || die "--burst $burst: expected a size such as 256kbit, 2mbit"
    local shape=${rate:+$rate burst $burst}
    need_netns
    if is_up; then
        if [[ -f $DIR/hosts && $(cat "$DIR/hosts") == "$k" && $(cat "$DIR/rate" 2>/dev/null) == "$shape" \
            && $(current_hosts | wc -l) == "$k" ]]; then
            say "already up: $k host(s) $(current_hosts | tr '\n' ' ')(rate ${shape:-unlimited}); 'down' first to recreate"
            return 0
        fi
        say "a different cluster is up: recreating it"
        cmd_down
    fi
    # Output captured before grep: under pipefail, `grep -q` quitting at its first match can
    # kill the writer with SIGPIPE and turn a match into a failed pipeline.
    local routes addrs
    routes=$(ip -4 route show "$NET.0/24") addrs=$(ip -4 addr show)
    if [[ -n $routes ]] || grep -q "inet $NET\." <<<"$addrs"; then
        die "$NET.0/24 is already in use on this machine (ip route/addr): refusing to touch it"
    fi
    mkdir -p "$DIR/uts"
    # Anything failing (or interrupted) half-way: take down what was made.
    trap 'trap - ERR INT TERM; say "up failed: cleaning up"; cmd_down >/dev/null 2>&1 || true' ERR
    trap 'trap - ERR INT TERM; say "interrupted: cleaning up"; cmd_down >/dev/null 2>&1 || true; exit 130' INT TERM
    ip link add "$BR" type bridge
    ip addr add "$NET.1/24" dev "$BR"
    ip link set "$BR" up
    local i h out
    for ((i = 1; i <= k; i++)); do
        h=$PREFIX$i
        ip netns add "$h"
        ip link add "$VETH$i" type veth peer name "$INNER" netns "$h"
        ip link set "$VETH$i" master "$BR" up
        ip -n "$h" addr add "$(host_ip "$h")/24" dev "$INNER"
        ip -n "$h" link set lo up
        ip -n "$h" link set "$INNER" up
        uts_add "$h"
        if [[ -n $rate ]]; then
            tc qdisc add dev "$VETH$i" root tbf rate "$rate" burst "$burst" latency 50ms
            tc -n "$h" qdisc add dev "$INNER" root tbf rate "$rate" burst "$burst" latency 50ms
        fi
    done
    hosts_add "$k"
    echo "$k" >"$DIR/hosts"
    echo "$shape" >"$DIR/rate"
    trap - ERR INT TERM
    # The bridge forwards at once (no STP); wait until host 1 reaches it (nothing listens on
    # port 9 of the bridge: "refused" means the path works).
    for ((i = 0; i < 50; i++)); do
        if out=$(ip netns exec "${PREFIX}1" timeout 2 bash -c "exec 3<>/dev/tcp/$NET.1/9" 2>&1); then break; fi
        [[ $out == *refused* ]] && break
        sleep 0.1
    done
    say "up: $k host(s) ${PREFIX}1..$PREFIX$k = $NET.11..$NET.$((10 + k)) on bridge $BR ($NET.1), rate ${shape:-unlimited}"
}

kill_pids() {  # kill_pids WHAT PID...: TERM, wait up to 10 s, then KILL
    local what=$1 pid i alive
    shift
    (($#)) || return 0
    kill -TERM "$@" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        alive=0
        for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        ((alive)) || return 0
        sleep 0.2
    done
    say "$what: SIGKILL to $*"
    kill -KILL "$@" 2>/dev/null || true
}

cmd_down() {
    if ! is_up && [[ ! -d $DIR ]] && ! grep -qF "$MARK_BEGIN" "$HOSTS_FILE" 2>/dev/null; then
        say "nothing is up"
        return 0
    fi
    need_root
    slurm_down
    local h pids i veths
    for h in $(current_hosts); do
        # Processes left inside (ranks of a killed job, a shell): end them, by PID.
        mapfile -t pids < <(ip netns pids "$h" 2>/dev/null)
        if ((${#pids[@]})); then
            say "$h: ending ${#pids[@]} process(es) still inside: ${pids[*]}"
            kill_pids "$h" "${pids[@]}"
        fi
    done
    # Veths first: deleting one end deletes the pair at once, while a deleted namespace takes
    # its veth with it only later (asynchronously) - and a quick `up` would find it still there.
    for ((i = 0; i < 25; i++)); do
        mapfile -t veths < <(ip -o link show 2>/dev/null | sed -n "s/^[0-9]*: \(${VETH}[0-9]*\)[@:].*/\1/p")
        ((${#veths[@]})) || break
        for h in "${veths[@]}"; do ip link del "$h" 2>/dev/null || true; done
        sleep 0.2
    done
    for h in $(current_hosts); do
        ip netns del "$h" 2>/dev/null || say "could not delete namespace $h"
    done
    ip link show "$BR" >/dev/null 2>&1 && ip link del "$BR"
    hosts_remove
    uts_remove
    rm -rf "$DIR"
    say "down: namespaces, veths, bridge $BR, /etc/hosts entries and $DIR removed"
}

cmd_status() {
    local hosts h rc=0
    hosts=$(current_hosts)
    if [[ -z $hosts ]] && ! ip link show "$BR" >/dev/null 2>&1; then
        echo "down (no $PREFIX* namespaces, no bridge $BR)"
        rc=1
    else
        echo "bridge $BR: $(ip -br addr show "$BR" 2>/dev/null | awk '{print $2, $3}')"
        echo "rate: $(cat "$DIR/rate" 2>/dev/null | sed 's/^$/unlimited/')"
        for h in $hosts; do
            printf '%s: %s' "$h" "$(ip -n "$h" -br -4 addr show "$INNER" 2>/dev/null | awk '{print $3}')"
            local q
            q=$(tc -n "$h" qdisc show dev "$INNER" 2>/dev/null | grep -o 'rate [^ ]* burst [^ ]*' || true)
            [[ -n $q ]] && printf '  (tbf %s)' "$q"
            printf '\n'
        done
        grep -qF "$MARK_BEGIN" "$HOSTS_FILE" 2>/dev/null && echo "/etc/hosts: entries present"
    fi
    if slurm_running; then
        echo "slurm: running (SLURM_CONF=$SCONF)"
        SLURM_CONF=$SCONF sinfo -N -o '%N %T %c' 2>/dev/null | sed 's/^/  /' || true
    fi
    return "$rc"
}

# --- exec: one command in a namespace (also hydra's launcher) ---------------------------------
cmd_exec() {
    while [[ ${1:-} == -* ]]; do shift; done   # hydra's ssh options (-x)
    (($# >= 2)) || die "exec HOST CMD...: need a host and a command"
    local host=$1
    shift
    if [[ $host =~ ^$NET\.([0-9]+)$ ]]; then host=$PREFIX$((BASH_REMATCH[1] - 10)); fi
    host=${host%%.*}   # a qualified name, if someone passes one
    [[ -e /run/netns/$host ]] || die "no such host '$host' (namespaces: $(current_hosts | tr '\n' ' '))"
    need_root
    local uts
    uts=$(uts_of "$host")
    if [[ -n $uts ]]; then
        exec ip netns exec "$host" nsenter "$uts" bash -c "$*"
    fi
    exec ip netns exec "$host" bash -c "$*"
}

# --- mpiexec through the namespaces -------------------------------------------------------------
shell_words() {  # the words as one shell command line (quoted only where needed)
    local w out=()
    for w in "$@"; do
        if [[ $w =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then
            out+=("$w")
        elif [[ $w != *"'"* ]]; then
            out+=("'$w'")
        else
            out+=("$(printf '%q' "$w")")
        fi
    done
    echo "${out[*]}"
}

find_mpiexec() {
    local m
    for m in "${MPICOLL_NETNS_MPIEXEC:-}" "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/mpiexec}" "$ROOT/.venv/bin/mpiexec" \
        "$(command -v mpiexec || true)"; do
        [[ -n $m && -x $m ]] && { echo "$m"; return 0; }
    done
    return 1
}

cmd_mpiexec() {
    need_root
    local hosts mpx a has_hosts=0
    hosts=$(current_hosts)
    [[ -n $hosts ]] || die "the cluster is not up ('$0 up K' first)"
    mpx=$(find_mpiexec) || die "no mpiexec found (activate the venv with the mpich wheel, or set MPICOLL_NETNS_MPIEXEC)"
    local version
    version=$("$mpx" --version 2>/dev/null || true)   # captured: see cmd_up on grep -q and SIGPIPE
    grep -q HYDRA <<<"$version" \
        || die "$mpx is not MPICH's hydra (needs -launcher-exec); set MPICOLL_NETNS_MPIEXEC"
    for a in "$@"; do
        case $a in -host | -hosts | -f | -hostfile | -machinefile | -machine) has_hosts=1 ;; esac
    done
    local cmd=("$mpx" -launcher ssh -launcher-exec "$SELF" -iface "$BR")
    [[ -n ${UCX_TLS:-} ]] || cmd+=(-genv UCX_TLS "tcp,self")
    ((has_hosts)) || cmd+=(-hosts "$(echo "$hosts" | paste -sd,)")
    cmd+=("$@")
    say "$(shell_words "${cmd[@]}")"
    exec "${cmd[@]}"
}

# --- Slurm: slurmctld in the root namespace, one slurmd per namespace ---------------------------
pid_alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

slurm_running() { pid_alive "$SDIR/run/slurmctld.pid"; }

slurm_all_running() {  # slurmctld and a slurmd for every host
    slurm_running || return 1
    local h
    for h in $(current_hosts); do pid_alive "$SDIR/run/slurmd-$h.pid" || return 1; done
}

slurm_fail() {  # slurm_fail MSG: show the logs' ends, stop what was started, exit 1
    tail -n 15 "$SDIR"/log/*.log >&2 2>/dev/null || true
    slurm_down >/dev/null 2>&1 || true
    die "$1"
}

slurm_write_conf() {  # slurm_write_conf HOSTS...
    local h
    mkdir -p "$SDIR"/{etc,state,spool,log,run}
    cat >"$SDIR/etc/task_prolog.sh" <<'EOF'
#!/bin/sh
# Written by scripts/netns_cluster.sh: UCX (the MPICH wheel's netmod) would otherwise move
# messages between namespaces through shared memory (one boot id); force TCP over the veths.
[ -n "$UCX_TLS" ] || echo "export UCX_TLS=tcp,self"
EOF
    chmod 0755 "$SDIR/etc/task_prolog.sh"
    cat >"$SCONF" <<EOF
# Written by scripts/netns_cluster.sh: a test cluster of network namespaces. Not for production.
ClusterName=mpicoll-netns
SlurmctldHost=$(hostname -s)($NET.1)
SlurmctldPort=$SPORT
SlurmdPort=$((SPORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
TaskProlog=$SDIR/etc/task_prolog.sh
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=3600
KillWait=5
InactiveLimit=0
MessageTimeout=20
StateSaveLocation=$SDIR/state
SlurmdSpoolDir=$SDIR/spool/%n
SlurmctldPidFile=$SDIR/run/slurmctld.pid
SlurmdPidFile=$SDIR/run/slurmd-%n.pid
SlurmctldLogFile=$SDIR/log/slurmctld.log
SlurmdLogFile=$SDIR/log/slurmd-%n.log
PlugStackConfig=$SDIR/etc/plugstack.conf
EOF
    for h in "$@"; do
        echo "NodeName=$h NodeHostname=$h NodeAddr=$(host_ip "$h") CPUs=$SCPUS State=UNKNOWN" >>"$SCONF"
    done
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$SCONF"
    : >"$SDIR/etc/plugstack.conf"
}

slurm_ready() { SLURM_CONF=$SCONF sinfo -h -N -o '%N %T' 2>/dev/null | grep -cE ' (idle|mixed|allocated)' || true; }

slurm_up() {
    need_root
    local hosts h i n
    mapfile -t hosts < <(current_hosts)
    ((${#hosts[@]})) || die "the cluster is not up ('$0 up K' first)"
    for i in slurmctld slurmd sinfo sbatch srun nsenter; do
        command -v "$i" >/dev/null || die "no $i: install Slurm (apt-get install slurmctld slurmd slurm-client; or run scripts/local_slurm.sh up once)"
    done
    if slurm_all_running; then
        say "slurm already running (SLURM_CONF=$SCONF)"
        echo "export SLURM_CONF=$SCONF"
        return 0
    fi
    slurm_down
    rm -rf "$SDIR/state" "$SDIR/spool"
    slurm_write_conf "${hosts[@]}"
    if (exec 3<>"/dev/tcp/$NET.1/$SPORT") 2>/dev/null; then
        die "port $SPORT on $NET.1 is taken: set MPICOLL_NETNS_SLURM_PORT"
    fi
    export SLURM_CONF=$SCONF
    slurmctld -c -f "$SCONF" || slurm_fail "slurmctld failed to start (log: $SDIR/log/slurmctld.log)"
    for h in "${hosts[@]}"; do
        mkdir -p "$SDIR/spool/$h"
        # nsenter --net, not `ip netns exec`: that one remounts /sys in a mount namespace of its
        # own, without /sys/fs/cgroup, and slurmd 22.05 then fails ("Unable to initialize cgroup
        # plugin") even with proctrack/linuxproc.
        # shellcheck disable=SC2046
        nsenter --net="/run/netns/$h" $(uts_of "$h") slurmd -c -N "$h" -f "$SCONF" \
            || slurm_fail "slurmd $h failed to start (log: $SDIR/log/slurmd-$h.log)"
    done
    n=${#hosts[@]}
    for ((i = 0; i < 150; i++)); do
        (($(slurm_ready) == n)) && break
        sleep 0.2
    done
    if (($(slurm_ready) != n)); then
        sinfo -N >&2 || true
        slurm_fail "not all $n Slurm node(s) idle after 30 s"
    fi
    say "slurm up: nodes ${hosts[*]} ($SCPUS CPUs each), partition debug, slurmctld $NET.1:$SPORT, dir $SDIR"
    echo "export SLURM_CONF=$SCONF"
}

slurm_down() {
    [[ -d $SDIR/run ]] || return 0
    export SLURM_CONF=$SCONF
    if slurm_running && command -v squeue >/dev/null; then
        local jobs i
        mapfile -t jobs < <(squeue -h -o %i 2>/dev/null)
        if ((${#jobs[@]})); then
            scancel "${jobs[@]}" 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do
                [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
                sleep 0.2
            done
        fi
    fi
    # All daemons at once (each takes a few seconds to stop), then wait for all of them.
    local f pids=() names=()
    for f in "$SDIR"/run/slurmd-*.pid "$SDIR/run/slurmctld.pid"; do
        [[ -e $f ]] || continue
        if pid_alive "$f"; then
            pids+=("$(cat "$f")")
            names+=("$(basename "$f" .pid)($(cat "$f"))")
        fi
        rm -f "$f"
    done
    ((${#pids[@]})) || return 0
    kill_pids slurm "${pids[@]}"
    say "stopped ${names[*]}"
}

cmd_slurm() {
    case ${1:-} in
        up) slurm_up ;;
        down) need_root; slurm_down ;;
        status)
            slurm_running || { echo "slurm: not running (dir $SDIR)"; return 1; }
            SLURM_CONF=$SCONF sinfo -N -o '%N %T %c'
            SLURM_CONF=$SCONF squeue
            ;;
        env) echo "export SLURM_CONF=$SCONF" ;;
        *) die "slurm up|down|status|env" ;;
    esac
}

usage() { sed -n '2,12p' "$SELF" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

case ${1:-} in
    up) shift; cmd_up "$@" ;;
    down) cmd_down ;;
    status) cmd_status ;;
    exec) shift; cmd_exec "$@" ;;
    mpiexec | run) shift; cmd_mpiexec "$@" ;;
    slurm) shift; cmd_slurm "$@" ;;
    -h | --help | help) usage 0 ;;
    "") usage ;;
    -*) cmd_exec "$@" ;;                        # hydra: LAUNCHER_EXEC -x HOST CMD...
    "$PREFIX"[0-9]*) cmd_exec "$@" ;;           # a launcher that passes no options
    *) say "unknown command '$1'"; usage ;;
esac
