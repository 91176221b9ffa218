# The MPI launcher for a ctrain built with MPI, for the scripts that run
# `mpirun` (tests/test_mpi.sh, bench/data_parallel.sh), which source it
# after setting $ctrain:
#   . tests/mpi_env.sh; mpi_env || exit $?
# mpi_env sets $launcher (the MPI's own mpiexec.openmpi or mpiexec.mpich,
# else mpirun, else mpiexec) and exports what Open MPI
# needs as root (containers, CI) and for more ranks than cores. Returns 77
# when ctrain was built without MPI, 1 (with a message) when no launcher.
mpi_env() {
  if "$ctrain" info | grep -q '^MPI: none'; then
    echo "ctrain was built without MPI (meson -Dmpi=disabled, or no MPI found)"
    return 77
  fi
  # The launcher of the MPI ctrain was built with, where Debian has both
  # (mpirun is then one of them, by update-alternatives).
  local flavour=openmpi
  "$ctrain" info | grep -q '^MPI: MPICH' && flavour=mpich
  launcher=$(command -v "mpiexec.$flavour" || command -v mpirun ||
    command -v mpiexec) || {
    echo "FAIL: ctrain has MPI but there is no mpirun or mpiexec (apt-get install openmpi-bin)"
    return 1
  }
  export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
  export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
  export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-yes}
}
