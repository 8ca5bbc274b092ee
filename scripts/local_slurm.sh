#!/usr/bin/env bash
# A local Slurm cluster on 127.0.0.1 (one node, or several slurmd on this one machine), for
# testing the job scripts in jobs/.
#
#   bash scripts/local_slurm.sh up       # install (Debian/apt) if needed, start, wait until idle
#   eval "$(bash scripts/local_slurm.sh env)"   # export SLURM_CONF for sbatch/srun/scontrol
#   sbatch -N 1 jobs/demo.sh
#   bash scripts/local_slurm.sh status
#   bash scripts/local_slurm.sh down     # cancel jobs, stop the daemons by PID
#
# Everything (slurm.conf, state, spool, logs, PID files) lives under one directory,
# MPICOLL_SLURM_DIR (default /tmp/mpicoll-slurm-$USER); nothing is written to /etc.
# Needs root (SlurmUser=root; apt-get). No systemd: the daemons are started by hand.
#
# Settings (environment):
#   MPICOLL_SLURM_DIR      directory for all cluster files       (/tmp/mpicoll-slurm-$USER)
#   MPICOLL_SLURM_NODES    Slurm nodes (slurmd daemons) to run    (1; 2 lets `--nodes=2` jobs run)
#   MPICOLL_SLURM_CPUS     CPUs each node advertises              (8; more than cores is fine)
#   MPICOLL_SLURM_PORT     slurmctld port; slurmd i uses PORT+i   (16817)
#   MPICOLL_SLURM_INSTALL  auto: apt-get install when missing; no: never install   (auto)
#   MPICOLL_SLURM_AUTH     none: AuthType=auth/none (loopback only); munge: run munged  (none)
#   MPICOLL_SLURM_GPUS     GPUs to advertise as gres/gpu          (auto: count of `nvidia-smi -L`)
#
# Facts this relies on (Debian 12, slurm-wlm 22.05): node name = `hostname -s` with
# NodeAddr=127.0.0.1 (more nodes: NAME-2, NAME-3, ... with NodeHostname=`hostname -s`, a port
# each, started as `slurmd -N NAME`); SlurmdParameters=config_overrides lets a node advertise
# more CPUs than the machine has; proctrack/linuxproc + task/none need no cgroups; MpiDefault
# stays "none" on purpose, so a job script that forgets `srun --mpi=pmi2` is caught (the MPICH
# wheel would silently start N singletons).
set -euo pipefail

DIR=${MPICOLL_SLURM_DIR:-/tmp/mpicoll-slurm-${USER:-$(id -un)}}
CPUS=${MPICOLL_SLURM_CPUS:-8}
NNODES=${MPICOLL_SLURM_NODES:-1}
PORT=${MPICOLL_SLURM_PORT:-16817}
AUTH=${MPICOLL_SLURM_AUTH:-none}
CONF=$DIR/etc/slurm.conf
NODE=$(hostname -s)
PARTITION=debug
export SLURM_CONF=$CONF

say() { printf 'local_slurm: %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

[[ $NNODES =~ ^[1-9][0-9]*$ ]] || die "MPICOLL_SLURM_NODES=$NNODES: expected a count >= 1"
[[ $AUTH == none || $AUTH == munge ]] || die "MPICOLL_SLURM_AUTH=$AUTH: expected none or munge"
NODES=("$NODE")
for ((i = 2; i <= NNODES; i++)); do NODES+=("$NODE-$i"); done

pid_alive() {  # pid_alive FILE -> 0 if the PID in FILE is a running process
    [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

all_running() {
    pid_alive "$DIR/run/slurmctld.pid" || return 1
    local n
    for n in "${NODES[@]}"; do pid_alive "$DIR/run/slurmd-$n.pid" || return 1; done
}

install_packages() {
    local missing=()
    command -v slurmctld >/dev/null || missing+=(slurmctld)
    command -v slurmd >/dev/null || missing+=(slurmd)
    command -v sbatch >/dev/null || missing+=(slurm-client)
    [[ $AUTH == munge ]] && ! command -v munged >/dev/null && missing+=(munge)
    ((${#missing[@]} == 0)) && return 0
    [[ ${MPICOLL_SLURM_INSTALL:-auto} == no ]] && die "missing ${missing[*]} and MPICOLL_SLURM_INSTALL=no"
    command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
    say "installing ${missing[*]} (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >"$DIR/log/apt.log" 2>&1 || { tail -20 "$DIR/log/apt.log" >&2; die "apt-get update failed"; }
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$DIR/log/apt.log" 2>&1 \
        || { tail -20 "$DIR/log/apt.log" >&2; die "apt-get install failed"; }
}

gpu_count() {
    if [[ -n ${MPICOLL_SLURM_GPUS:-} && ${MPICOLL_SLURM_GPUS} != auto ]]; then
        echo "$MPICOLL_SLURM_GPUS"
    elif command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
        nvidia-smi -L | grep -c '^GPU ' || true
    else
        echo 0
    fi
}

write_conf() {
    local gpus=$1 gres_node="" gres_types="" i
    if ((gpus > 0)); then
        # The GPUs belong to the first node only (the others share this machine).
        gres_types="GresTypes=gpu"
        gres_node="Gres=gpu:$gpus"
        : >"$DIR/etc/gres.conf"
        for ((i = 0; i < gpus; i++)); do
            echo "NodeName=$NODE Name=gpu File=/dev/nvidia$i" >>"$DIR/etc/gres.conf"
        done
    fi
    local auth="AuthType=auth/none
CredType=cred/none"
    [[ $AUTH == munge ]] && auth="AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket"
    cat >"$CONF" <<EOF
# Written by scripts/local_slurm.sh: a loopback-only test cluster. Do not use in production.
ClusterName=mpicoll-local
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmUser=root
SlurmdUser=root
$auth
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
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
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
PlugStackConfig=$DIR/etc/plugstack.conf
$gres_types
EOF
    for ((i = 0; i < NNODES; i++)); do
        echo "NodeName=${NODES[i]} NodeHostname=$NODE NodeAddr=127.0.0.1 Port=$((PORT + 1 + i))" \
            "CPUs=$CPUS $( ((i == 0)) && echo "$gres_node") State=UNKNOWN" >>"$CONF"
    done
    echo "PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$CONF"
    : >"$DIR/etc/plugstack.conf"
}

start_munge() {
    mkdir -p "$DIR/munge"
    chmod 0711 "$DIR/munge"
    [[ -s $DIR/munge/munge.key ]] || dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 2>/dev/null
    chmod 0600 "$DIR/munge/munge.key"
    pid_alive "$DIR/run/munged.pid" && return 0
    munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
        --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munge.seed"
}

ready_nodes() { sinfo -h -N -o '%N %T' 2>/dev/null | grep -cE ' (idle|mixed|allocated)' || true; }

cmd_up() {
    [[ $(id -u) == 0 ]] || die "must run as root (SlurmUser=root, apt-get)"
    mkdir -p "$DIR"/{etc,state,spool,log,run}
    if all_running; then
        say "already running (SLURM_CONF=$CONF)"
        echo "export SLURM_CONF=$CONF"
        return 0
    fi
    cmd_down quiet || true
    mkdir -p "$DIR"/{etc,state,spool,log,run}
    install_packages
    local gpus n i
    gpus=$(gpu_count)
    write_conf "$gpus"
    [[ $AUTH == munge ]] && start_munge
    # -c: clear any saved state (a fresh cluster every time); the daemons fork and write PID files.
    slurmctld -c -f "$CONF" || die "slurmctld failed to start; see $DIR/log/slurmctld.log"
    for n in "${NODES[@]}"; do
        mkdir -p "$DIR/spool/$n"
        slurmd -c -N "$n" -f "$CONF" || die "slurmd $n failed to start; see $DIR/log/slurmd-$n.log"
    done
    for ((i = 0; i < 150; i++)); do
        (($(ready_nodes) == NNODES)) && break
        sleep 0.2
    done
    if (($(ready_nodes) != NNODES)); then
        sinfo -N >&2 || true
        tail -20 "$DIR"/log/*.log >&2 || true
        die "not all $NNODES node(s) idle after 30 s"
    fi
    say "up: $NNODES node(s) ${NODES[*]} ($CPUS CPUs each, $gpus GPUs), partition $PARTITION, dir $DIR"
    echo "export SLURM_CONF=$CONF"
}

cmd_down() {
    local quiet=${1:-}
    if pid_alive "$DIR/run/slurmctld.pid" && command -v scancel >/dev/null; then
        # Cancel what is still queued or running so that no slurmstepd outlives the cluster.
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
    local f name pid
    for f in "$DIR"/run/slurmd-*.pid "$DIR/run/slurmctld.pid" "$DIR/run/munged.pid"; do
        [[ -e $f ]] || continue
        name=$(basename "$f" .pid)
        pid_alive "$f" || { rm -f "$f"; continue; }
        pid=$(cat "$f")
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        if kill -0 "$pid" 2>/dev/null; then
            say "$name ($pid) ignored SIGTERM; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$f"
        [[ -n $quiet ]] || say "stopped $name ($pid)"
    done
}

cmd_status() {
    if all_running; then
        echo "running: SLURM_CONF=$CONF"
        sinfo -N -o '%N %T %c %G' || true
        squeue || true
    else
        echo "not running (dir $DIR)"
        return 1
    fi
}

case ${1:-} in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    *)
        sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
