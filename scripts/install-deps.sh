#!/usr/bin/env bash
# Installs hcoll's build and test dependencies from Debian's packages (uses sudo unless root).
#   install-deps.sh bench   what building and running the benchmark needs
#   install-deps.sh test    that plus what the whole test suite needs (Open MPI, Python, clang)
set -euo pipefail
what=${1:-test}
packages=(mpich libmpich-dev libspdlog-dev catch2 cmake g++ make pkg-config)
if [ "$what" = test ]; then
  # python3-mpi4py pulls in Open MPI and switches the mpicc/mpiexec alternatives: hcoll's build
  # always names mpicc.mpich / mpiexec.mpich (or .openmpi) explicitly.
  packages+=(libopenmpi-dev openmpi-bin python3 python3-numpy python3-mpi4py python3-torch
             python3-matplotlib clang libclang-rt-14-dev
             libtorch-dev pybind11-dev python3-dev)  # the torch.distributed backend's build
  # The pip stage: a venv, pip, and the build backend pip uses offline (--no-build-isolation).
  packages+=(python3-venv python3-pip python3-setuptools python3-wheel)
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
