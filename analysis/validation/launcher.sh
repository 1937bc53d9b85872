# shellcheck shell=bash
# Sourced by validate.sh and collectives.sh: the launcher of their calibrations and measured runs,
# and the settings those share.
#   launcher_setup SCRIPT GIVEN LAUNCHER
# sets the launcher's words: LAUNCHER's where GIVEN is 1 (--mpirun; without any word, or when its
# first is no command, SCRIPT exits 2 naming it), else mpirun --oversubscribe --bind-to none
# (--allow-run-as-root added as root: more ranks than cores here, wherever the kernel puts
# them). It exports OMP_NUM_THREADS=1 and OMPI_MCA_mpi_yield_when_idle, 1 unless the environment
# sets it: waiting ranks yield their core, for calibrate as for the measured runs (calibrate's
# turn_latency times two ranks on one core, which with a spinning library wait a whole time
# slice, 4 ms here, per message).
launcher_setup() {
  local script=$1 given=$2 launcher=$3
  if [ "$given" = 1 ]; then
    [ -z "${launcher// /}" ] &&
      { echo "$script: --mpirun is empty; allowed: a launcher and its options, e.g. 'mpirun --bind-to core'" >&2; exit 2; }
    read -r -a launcher_words <<<"$launcher"
    command -v "${launcher_words[0]}" >/dev/null ||
      { echo "$script: --mpirun '$launcher': '${launcher_words[0]}' is not a command here" >&2; exit 2; }
  else
    launcher_words=(mpirun --oversubscribe --bind-to none)
    [ "$(id -u)" = 0 ] && launcher_words+=(--allow-run-as-root)
  fi
  export OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
}

# launch W PROGRAM [ARGS...]: PROGRAM under the launcher with W ranks: each {ranks} in the
# launcher's words becomes W (e.g. srun -n {ranks}), or, where none has it, -np W follows them.
launch() {
  local ranks=$1 word placed=0
  local words=()
  shift
  for word in "${launcher_words[@]}"; do
    [[ $word == *"{ranks}"* ]] && placed=1
    words+=("${word//\{ranks\}/$ranks}")
  done
  [ "$placed" = 1 ] || words+=(-np "$ranks")
  "${words[@]}" "$@"
}

# The launcher as the reports name it, W for the rank count.
launcher_note() {
  local text="${launcher_words[*]}"
  if [[ $text == *"{ranks}"* ]]; then echo "${text//\{ranks\}/W}"; else echo "$text -np W"; fi
}
