# shellcheck shell=bash
# Sourced by validate.sh and collectives.sh: the launcher of their calibrations and measured runs,
# and the settings those share.
#   launcher_setup SCRIPT GIVEN LAUNCHER
# sets the array `mpirun`: LAUNCHER's words where GIVEN is 1 (--mpirun; without any word, SCRIPT
# exits 2 naming it), else mpirun --oversubscribe --bind-to none (--allow-run-as-root added as
# root: more ranks than cores here, wherever the kernel puts them). It exports OMP_NUM_THREADS=1
# and OMPI_MCA_mpi_yield_when_idle, 1 unless the environment sets it: waiting ranks yield their
# core, for calibrate as for the measured runs (calibrate's turn_latency times two ranks on one
# core, which with a spinning library wait a whole time slice, 4 ms here, per message).
launcher_setup() {
  local script=$1 given=$2 launcher=$3
  if [ "$given" = 1 ]; then
    [ -z "${launcher// /}" ] &&
      { echo "$script: --mpirun is empty; allowed: a launcher and its options, e.g. 'mpirun --bind-to core'" >&2; exit 2; }
    read -r -a mpirun <<<"$launcher"
  else
    mpirun=(mpirun --oversubscribe --bind-to none)
    [ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
  fi
  export OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
}
