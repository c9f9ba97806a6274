#!/usr/bin/env bash
# A single-node SLURM cluster with accounting (slurmdbd + MariaDB) for tests.
#
#   scripts/slurm_cluster.sh start    install if needed, configure, start, wait until usable
#   scripts/slurm_cluster.sh stop     cancel all jobs, stop every daemon (by the PID in its pid file)
#   scripts/slurm_cluster.sh status   print each daemon's state; exit 0 only if all run
#   scripts/slurm_cluster.sh env      print `export SLURM_CONF=...` (eval it before sbatch/sacct/submitit)
#   scripts/slurm_cluster.sh clean    stop, then delete the whole state folder
#
# All config, state, spool, pid and log files live under DW_SLURM_DIR
# (default /tmp/dw-slurm).  DW_SLURM_NODES=N (default 1) makes N nodes on this
# one machine: node1..nodeN, one slurmd each (`slurmd -N nodeI`, its own port,
# pid/log/spool files by node name, the machine's CPUs split between them). Nothing is written to /etc/slurm: clients find the
# config through SLURM_CONF. Needs root and Debian's apt-get (first run only).
# See docs/slurm.md.
set -euo pipefail

DIR="${DW_SLURM_DIR:-/tmp/dw-slurm}"
CLUSTER="${DW_SLURM_CLUSTER:-dwtest}"
# Ports: the default folder gets Slurm's usual 6817-6819 (MariaDB 3307, so a
# system MariaDB on 3306 is left alone); any other DW_SLURM_DIR gets its own
# block derived from the path, so two clusters can run side by side.
if [[ "$DIR" == /tmp/dw-slurm ]]; then
  _base=6817 _db=3307
else
  _h="$(printf '%s' "$DIR" | cksum | cut -d' ' -f1)"
  _base=$(( 21000 + (_h % 2000) * 4 )) _db=$(( 21000 + (_h % 2000) * 4 + 3 ))
fi
PORT="${DW_SLURM_PORT:-$_base}"             # slurmctld; slurmd PORT+1, slurmdbd PORT+2
DB_PORT="${DW_SLURM_DB_PORT:-$_db}"          # MariaDB, on 127.0.0.1 only
TIMEOUT="${DW_SLURM_TIMEOUT:-60}"            # seconds for each wait
NODES="${DW_SLURM_NODES:-1}"                 # nodes on this machine (slurmd daemons)
[[ "$NODES" =~ ^[1-9][0-9]?$ ]] || { echo "slurm_cluster.sh: DW_SLURM_NODES must be 1..99 (got $NODES)" >&2; exit 2; }
if (( NODES == 1 )); then NODE_NAMES=(localhost); else NODE_NAMES=($(seq -f 'node%g' 1 "$NODES")); fi
MAX_ARRAY="${DW_SLURM_MAX_ARRAY_SIZE:-8}"     # MaxArraySize: small, as real clusters cap arrays, so dw's array chunking is exercised
CRED_EXPIRE="${DW_SLURM_CRED_EXPIRE:-5}"     # s a requeued job waits before it may run again (Slurm default 120, minimum 5)
PACKAGES=(slurmctld slurmd slurm-client slurmdbd munge mariadb-server)
BINARIES=(slurmctld slurmd slurmdbd sbatch sacct sacctmgr scontrol sinfo munged mariadbd mariadb-install-db mariadb)

ETC="$DIR/etc"; RUN="$DIR/run"; LOG="$DIR/log"; MUNGE="$DIR/munge"; DB="$DIR/mysql"
CONF="$ETC/slurm.conf"
export SLURM_CONF="$CONF"

me="slurm_cluster.sh"
die() { echo "$me: $*" >&2; exit 1; }
say() { echo "$me: $*"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

# ---------------------------------------------------------------- daemons
# name | pid file | expected /proc/PID/comm
pidfile_of() {
  case "$1" in
    munged) echo "$MUNGE/munged.pid" ;;
    mariadbd) echo "$DB/mariadbd.pid" ;;
    slurmdbd) echo "$RUN/slurmdbd.pid" ;;
    slurmctld) echo "$RUN/slurmctld.pid" ;;
    slurmd) echo "$RUN/slurmd.pid" ;;
    slurmd@*) echo "$RUN/slurmd-${1#slurmd@}.pid" ;;
  esac
}
# start order; stop is the reverse.  One slurmd per node (slurmd@nodeI when there are several).
if (( NODES == 1 )); then SLURMDS=(slurmd); else SLURMDS=("${NODE_NAMES[@]/#/slurmd@}"); fi
DAEMONS=(munged mariadbd slurmdbd slurmctld "${SLURMDS[@]}")

# True if PID exists and is not a zombie (PID 1 here may reap exited daemons only seconds later).
alive() {
  local st
  st="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
  [[ -n "$st" && "$st" != Z && "$st" != X ]]
}

# PID of a running daemon (from its pid file, checked against /proc), or nothing.
running_pid() {
  local f pid comm
  f="$(pidfile_of "$1")"
  [[ -s "$f" ]] || return 1
  pid="$(tr -dc 0-9 <"$f")"
  [[ -n "$pid" ]] && alive "$pid" || return 1
  comm="$(cat "/proc/$pid/comm" 2>/dev/null)" || return 1
  [[ "$comm" == "${1%%@*}"* ]] || return 1     # a stale pid file whose PID was reused
  echo "$pid"
}

# True if something listens on TCP PORT (IPv4 or IPv6), read from /proc/net.
port_in_use() {
  local hex; hex="$(printf '%04X' "$1")"
  awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p {found=1} END {exit !found}' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

check_port() {  # check_port DAEMON PORT: die if DAEMON is not ours-running and PORT is taken
  running_pid "$1" >/dev/null && return 0
  if port_in_use "$2"; then
    die "port $2 ($1) already in use: another SLURM cluster or service? (set DW_SLURM_PORT / DW_SLURM_DB_PORT or DW_SLURM_DIR)"
  fi
}

wait_for() {  # wait_for SECONDS WHAT CMD...
  local limit="$1" what="$2"; shift 2
  local t0; t0="$(date +%s)"
  until "$@" >/dev/null 2>&1; do
    if (( $(date +%s) - t0 >= limit )); then
      return 1
    fi
    sleep 0.2
  done
}

stop_daemon() {
  local name="$1" pid i
  pid="$(running_pid "$name")" || { rm -f "$(pidfile_of "$name")"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do            # 30 s
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    say "$name (pid $pid) ignored SIGTERM for 30 s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
  rm -f "$(pidfile_of "$name")"
}

# ---------------------------------------------------------------- install
missing_binaries() {
  local b out=()
  for b in "${BINARIES[@]}"; do command -v "$b" >/dev/null 2>&1 || out+=("$b"); done
  echo "${out[*]:-}"
}

install_packages() {
  local missing; missing="$(missing_binaries)"
  [[ -z "$missing" ]] && return 0
  command -v apt-get >/dev/null 2>&1 || die "cannot install SLURM: apt-get not available (missing: $missing)"
  local t0; t0="$(now)"
  say "installing ${PACKAGES[*]} (missing: $missing)"
  # Keep package scripts from starting system daemons (we start our own below).
  local policy=/usr/sbin/policy-rc.d made_policy=""
  if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 755 "$policy"; made_policy=1
  fi
  local rc=0
  {
    apt-get update -q &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
  } >"$LOG/apt.log" 2>&1 || rc=$?
  [[ -n "$made_policy" ]] && rm -f "$policy"
  (( rc == 0 )) || die "apt-get failed (rc=$rc): $(tail -n 1 "$LOG/apt.log")"
  missing="$(missing_binaries)"
  [[ -z "$missing" ]] || die "installed packages but still missing: $missing"
  say "installed in $(since "$t0") s"
}

# ---------------------------------------------------------------- config
node_line() {
  # Layout as `slurmd -C` prints it, CPUs=nproc, RealMemory below free memory.
  local cpus layout free_mb mem
  # nproc honours OMP_NUM_THREADS: a caller that limits its threads (a benchmark module the tests
  # import sets it to 1) made it 1 on a 2-CPU machine, and slurmctld refused CPUs=1 against the
  # 2 cores slurmd -C reports (the SLURM tests then skipped: cluster unavailable).
  cpus="$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"
  layout="$(slurmd -C 2>/dev/null | head -n 1 | grep -o '\(Boards\|SocketsPerBoard\|CoresPerSocket\|ThreadsPerCore\)=[0-9]*' | tr '\n' ' ')"
  # With CR_Core a job takes whole cores: if the machine shows hyperthreads
  # (ThreadsPerCore>1) two one-CPU jobs could not run at once. Declare one
  # thread per core instead so that every CPU is schedulable on its own.
  if [[ "$layout" =~ ThreadsPerCore=([0-9]+) ]] && (( BASH_REMATCH[1] > 1 )); then
    layout="Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1"
  fi
  free_mb="$(awk '/^MemAvailable:/{print int($2/1024)}' /proc/meminfo)"
  mem=$(( free_mb * 9 / 10 ))
  (( mem > 256 )) || mem=256
  if (( NODES == 1 )); then
    echo "NodeName=localhost CPUs=$cpus ${layout}RealMemory=$mem State=UNKNOWN"
    return
  fi
  # Several nodes on one machine: each slurmd its own port, the CPUs and memory split between them.
  local per=$(( cpus / NODES )) i
  (( per >= 1 )) || per=1
  for ((i = 1; i <= NODES; i++)); do
    echo "NodeName=node$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((PORT + 10 + i)) CPUs=$per Boards=1 SocketsPerBoard=1 CoresPerSocket=$per ThreadsPerCore=1 RealMemory=$(( mem / NODES )) State=UNKNOWN"
  done
}

write_config() {
  mkdir -p "$ETC" "$RUN" "$LOG" "$DIR/state" "$DIR/spool"
  local n; for n in "${NODE_NAMES[@]}"; do mkdir -p "$DIR/spool/$n"; done
  chmod 755 "$DIR"
  local tmp="$CONF.tmp"
  cat >"$tmp" <<EOF
# Generated by scripts/slurm_cluster.sh — do not edit (rewritten on every start)
ClusterName=$CLUSTER
SlurmctldHost=localhost
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire also sets how long a requeued job waits before it may start again (default 120 s).
AuthInfo=socket=$MUNGE/munge.socket.2,cred_expire=$CRED_EXPIRE
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
KillWait=5
MaxArraySize=$MAX_ARRAY
JobRequeue=1
PreemptType=preempt/none
SchedulerType=sched/backfill
# Default passes every 60 s (main) / 30 s (backfill) would leave a requeued job pending that long.
SchedulerParameters=sched_interval=2,bf_interval=2
MinJobAge=300
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool$( (( NODES > 1 )) && echo /%n)
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd$( (( NODES > 1 )) && echo -%n).pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd$( (( NODES > 1 )) && echo -%n).log
SlurmctldDebug=info
SlurmdDebug=info
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$((PORT + 2))
# Clients reach slurmdbd with the munge socket named here (22.05 ignores AuthInfo for that link).
AccountingStoragePass=$MUNGE/munge.socket.2
# Enforce association and QOS limits (MaxSubmitJobs...), as real clusters do: a job over a
# limit is refused at sbatch time. Every job needs an association (root has one from the start).
AccountingStorageEnforce=limits
JobCompType=jobcomp/none
$(node_line)
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  mv "$tmp" "$CONF"

  # slurmdbd.conf is looked up next to SLURM_CONF; it must be mode 600.
  local pass_file="$ETC/dbpass"
  if [[ ! -s "$pass_file" ]]; then
    (umask 077; head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$pass_file")
  fi
  (umask 077; cat >"$ETC/slurmdbd.conf" <<EOF
# Generated by scripts/slurm_cluster.sh
AuthType=auth/munge
AuthInfo=socket=$MUNGE/munge.socket.2
DbdHost=localhost
DbdPort=$((PORT + 2))
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$(cat "$pass_file")
StorageLoc=slurm_acct_db
PidFile=$RUN/slurmdbd.pid
LogFile=$LOG/slurmdbd.log
DebugLevel=info
EOF
  )
  chmod 600 "$ETC/slurmdbd.conf"
}

# ---------------------------------------------------------------- start steps
start_munge() {
  running_pid munged >/dev/null && return 0
  mkdir -p "$MUNGE"
  if [[ ! -s "$MUNGE/munge.key" ]]; then
    if command -v mungekey >/dev/null 2>&1; then
      mungekey --create --keyfile="$MUNGE/munge.key" >/dev/null 2>&1 \
        || dd if=/dev/urandom of="$MUNGE/munge.key" bs=1024 count=1 status=none
    else
      dd if=/dev/urandom of="$MUNGE/munge.key" bs=1024 count=1 status=none
    fi
  fi
  chown -R munge:munge "$MUNGE"; chmod 711 "$MUNGE"; chmod 600 "$MUNGE/munge.key"
  rm -f "$MUNGE/munge.socket.2" "$MUNGE/munge.socket.2.lock"
  runuser -u munge -- munged \
    --socket="$MUNGE/munge.socket.2" --key-file="$MUNGE/munge.key" \
    --pid-file="$MUNGE/munged.pid" --log-file="$MUNGE/munged.log" \
    --seed-file="$MUNGE/munged.seed" </dev/null >>"$LOG/munged.out" 2>&1 \
    || die "munged did not start: $(tail -n 1 "$MUNGE/munged.log" 2>/dev/null)"
  wait_for "$TIMEOUT" munge bash -c "munge -S '$MUNGE/munge.socket.2' -n | unmunge -S '$MUNGE/munge.socket.2'" \
    || die "munge not answering after ${TIMEOUT} s (see $MUNGE/munged.log)"
}

db_sql() { mariadb --no-defaults --protocol=socket --socket="$DB/mysqld.sock" -u root "$@"; }

start_mariadb() {
  running_pid mariadbd >/dev/null && return 0
  local fresh=""
  if [[ ! -d "$DB/data/mysql" ]]; then
    fresh=1
    rm -rf "$DB"; mkdir -p "$DB/data"; chown -R mysql:mysql "$DB"
    mariadb-install-db --no-defaults --user=mysql --datadir="$DB/data" \
      --auth-root-authentication-method=socket --skip-test-db \
      >"$LOG/mariadb-install.log" 2>&1 \
      || die "mariadb-install-db failed (see $LOG/mariadb-install.log)"
  fi
  chown -R mysql:mysql "$DB"
  setsid mariadbd --no-defaults --user=mysql --datadir="$DB/data" \
    --socket="$DB/mysqld.sock" --pid-file="$DB/mariadbd.pid" \
    --log-error="$DB/mariadbd.err" --bind-address=127.0.0.1 --port="$DB_PORT" \
    --skip-name-resolve --innodb-buffer-pool-size=64M \
    </dev/null >>"$LOG/mariadbd.out" 2>&1 &
  wait_for "$TIMEOUT" mariadb db_sql -e "SELECT 1" \
    || die "MariaDB not answering after ${TIMEOUT} s (see $DB/mariadbd.err)"
  wait_for 10 "mariadb pid file" running_pid mariadbd \
    || die "MariaDB wrote no pid file $DB/mariadbd.pid"
  local pass; pass="$(cat "$ETC/dbpass")"
  db_sql <<EOF || die "could not create the accounting database"
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
FLUSH PRIVILEGES;
EOF
  [[ -n "$fresh" ]] && say "created accounting database" || true
}

start_slurmdbd() {
  running_pid slurmdbd >/dev/null && return 0
  slurmdbd </dev/null >>"$LOG/slurmdbd.out" 2>&1 || die "slurmdbd did not start (see $LOG/slurmdbd.log)"
  # slurmdbd answers once it has built its tables.
  wait_for "$TIMEOUT" slurmdbd sacctmgr -n -i show cluster \
    || die "slurmdbd not answering after ${TIMEOUT} s (see $LOG/slurmdbd.log)"
}

start_slurmctld() {
  running_pid slurmctld >/dev/null && return 0
  slurmctld </dev/null >>"$LOG/slurmctld.out" 2>&1 || die "slurmctld did not start (see $LOG/slurmctld.log)"
  wait_for "$TIMEOUT" slurmctld scontrol ping \
    || die "slurmctld not answering after ${TIMEOUT} s (see $LOG/slurmctld.log)"
}

start_slurmd() {
  local d node
  for d in "${SLURMDS[@]}"; do
    running_pid "$d" >/dev/null && continue
    node="${NODE_NAMES[0]}"; [[ "$d" == slurmd@* ]] && node="${d#slurmd@}"
    slurmd -N "$node" </dev/null >>"$LOG/slurmd.out" 2>&1 || die "slurmd -N $node did not start (see $LOG/)"
  done
}

node_idle() {  # every node idle (or in use)
  local n
  for n in "${NODE_NAMES[@]}"; do
    [[ "$(sinfo -h -N -n "$n" -o %t 2>/dev/null | head -n 1)" =~ ^(idle|mix|alloc) ]] || return 1
  done
}
cluster_registered() { sacctmgr -n -P show cluster format=cluster 2>/dev/null | grep -qx "$CLUSTER"; }
sacct_ok() { sacct -n -X -S now-1minute >/dev/null 2>&1; }

all_running() {
  local d
  for d in "${DAEMONS[@]}"; do running_pid "$d" >/dev/null || return 1; done
}

# ---------------------------------------------------------------- verbs
cmd_start() {
  local t0; t0="$(now)"
  (( EUID == 0 )) || die "must run as root (uid $EUID)"
  if all_running && node_idle && sacct_ok; then
    say "already running (SLURM_CONF=$CONF)"
    return 0
  fi
  mkdir -p "$DIR" "$LOG" 2>/dev/null && [[ -w "$DIR" ]] || die "cannot create a writable state folder $DIR"
  check_port mariadbd "$DB_PORT"
  check_port slurmctld "$PORT"
  check_port slurmd "$((PORT + 1))"
  check_port slurmdbd "$((PORT + 2))"
  if (( NODES > 1 )); then
    local i; for ((i = 1; i <= NODES; i++)); do check_port "slurmd@node$i" "$((PORT + 10 + i))"; done
  fi
  install_packages
  # Rewrite the config only when slurmctld/slurmd are down (they read it at start).
  local any_slurmd="" d
  for d in "${SLURMDS[@]}"; do running_pid "$d" >/dev/null && any_slurmd=1; done
  if ! running_pid slurmctld >/dev/null && [[ -z "$any_slurmd" ]]; then
    write_config
  fi
  start_munge
  start_mariadb
  start_slurmdbd
  start_slurmctld
  start_slurmd
  wait_for "$TIMEOUT" node sacct_ok || die "sacct not answering after ${TIMEOUT} s (see $LOG/slurmdbd.log)"
  wait_for "$TIMEOUT" cluster cluster_registered \
    || die "cluster '$CLUSTER' not registered in slurmdbd after ${TIMEOUT} s (see $LOG/slurmctld.log)"
  if ! wait_for "$TIMEOUT" node node_idle; then
    die "node not idle after ${TIMEOUT} s: $(sinfo -h -N -o '%N %T %E' 2>&1 | head -n 1) (see $LOG/slurmd.log)"
  fi
  say "started in $(since "$t0") s (SLURM_CONF=$CONF)"
}

cmd_stop() {
  local t0; t0="$(now)"
  if running_pid slurmctld >/dev/null; then
    # Running jobs would outlive slurmd (slurmstepd is its own process): cancel them first.
    local ids
    ids="$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')"
    if [[ -n "${ids// /}" ]]; then
      # shellcheck disable=SC2086
      scancel $ids 2>/dev/null || true
      wait_for 30 "jobs to end" bash -c '[[ -z "$(squeue -h -o %A 2>/dev/null)" ]]' \
        || say "some jobs still listed after 30 s: $(squeue -h -o '%A %T' | tr '\n' ' ')"
    fi
  fi
  local i
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do stop_daemon "${DAEMONS[i]}"; done
  say "stopped in $(since "$t0") s"
}

cmd_status() {
  local d pid ok=0
  for d in "${DAEMONS[@]}"; do
    if pid="$(running_pid "$d")"; then echo "$d: running (pid $pid)"; else echo "$d: stopped"; ok=1; fi
  done
  if (( ok == 0 )); then
    echo "nodes: $(sinfo -h -N -o '%N %t %C' 2>&1 | tr '\n' ' ')(name, state, CPUs alloc/idle/other/total)"
    sacct_ok && echo "sacct: ok" || { echo "sacct: not answering"; ok=1; }
  fi
  echo "SLURM_CONF=$CONF"
  return $ok
}

cmd_env() {
  echo "export SLURM_CONF=$CONF"
}

cmd_clean() {
  cmd_stop
  case "$DIR" in /|/tmp|/root|/home|"") die "refusing to delete '$DIR'";; esac
  rm -rf "$DIR"
  say "removed $DIR"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  clean) cmd_clean ;;
  *) echo "usage: $0 start|stop|status|env|clean" >&2; exit 2 ;;
esac
