# shellcheck shell=bash
# Sourced by study scripts: daei_mpi NP ARGS... runs build/daei (or $D) on NP ranks of this machine, one thread a
# rank, ranks free to move between cores (studies run two commands at a time on 2 cores), as root where needed.
DAEI_MPI_ROOT_FLAGS=()
[[ $(id -u) -eq 0 ]] && DAEI_MPI_ROOT_FLAGS=(--allow-run-as-root)
daei_mpi() {  # NP ARGS...
  local np=$1
  shift
  mpirun "${DAEI_MPI_ROOT_FLAGS[@]}" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 \
    -np "$np" "${D:-build/daei}" "$@"
}
