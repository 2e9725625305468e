# shellcheck shell=bash
# Sourced, not run: the slurm.conf settings shared by the two Slurm clusters this project starts on one machine
# (tests/e2e/slurm_preempt.sh, one node on loopback; launch/emulate_cluster.sh, nodes in network namespaces).
#   slurm_conf LINE...   prints the shared settings, then each LINE (the caller's names, paths, ports, timeouts,
#                        nodes and partition), one a line
# Shared: root runs every daemon, munge authenticates, no cgroups, no accounting, cores as the unit, fake GPUs as
# gres (the sbatch scripts ask --gpus-per-task), a node that comes back is usable again (ReturnToService=2), finished
# jobs stay visible for 10 min (the tests read their state), and a node's own line may override its hardware.
slurm_conf() {
  cat <<'CONF'
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
GresTypes=gpu
ReturnToService=2
MinJobAge=600
SlurmdParameters=config_overrides
CONF
  printf '%s\n' "$@"
}
