#!/usr/bin/env bash
# Builds ctrain on a Debian machine and runs the default demo: installs the
# build dependencies that are missing (apt-get, with sudo when not root;
# Open MPI for data-parallel training with mpirun, which ctrain builds
# without too),
# configures a release build in ./build, compiles it, then trains the toy
# translator (configs/translate_toy.ini, about 2 minutes on 2 cores) and
# shows sample translations with the exact-match figure. Safe to run again:
# it only does what is missing (a finished demo is just evaluated again).
# CT_SETUP_NO_DEMO=1 stops after the build.
set -euo pipefail
cd "$(dirname "$0")"

packages=(gcc libc6-dev meson ninja-build pkg-config zlib1g-dev libpng-dev
          openmpi-bin libopenmpi-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi

[ -f build/build.ninja ] || meson setup build --buildtype=release
meson compile -C build
# A build configured before MPI was installed: find it now (-Dmpi=auto).
if command -v mpicc >/dev/null 2>&1 &&
   ./build/train/ctrain info | grep -q '^MPI: none' &&
   ! meson configure build | grep -qE '^ *mpi +disabled'; then
  meson setup --reconfigure build && meson compile -C build
fi
./build/train/ctrain info
[ -n "${CT_SETUP_NO_DEMO:-}" ] && exit 0
./build/train/ctrain train configs/translate_toy.ini --resume auto
