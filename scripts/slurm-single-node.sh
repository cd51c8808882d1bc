#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine (munge for authentication, slurmctld and slurmd on
# localhost, one partition "debug" with every core), to run `extrapolate sweep --executor slurm` against a
# real scheduler. Debian or Ubuntu, as root. Idempotent: a second call restarts the daemons.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq slurm-wlm munge >/dev/null
fi

host=$(hostname -s)
cpus=$(nproc)
memory_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))

# munge: one shared key, owned by the munge user
mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
[ -s /etc/munge/munge.key ] || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
chmod 700 /etc/munge && chmod 400 /etc/munge/munge.key
pkill -x munged || true
sleep 1
su -s /bin/sh munge -c "/usr/sbin/munged --force"
munge -n | unmunge >/dev/null  # authentication works

# slurm: no cgroups (containers rarely allow them), processes tracked through /proc
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
chown -R slurm:slurm /var/spool/slurmctld /var/log/slurm 2>/dev/null || true
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=single
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=$host CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF

pkill -x slurmctld || true
pkill -x slurmd || true
sleep 1
slurmctld
slurmd
for _ in $(seq 30); do
  sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)' && break
  sleep 1
done
sinfo
