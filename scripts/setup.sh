#!/usr/bin/env bash
# Installs what burn-ruda needs at run time on a Debian/Ubuntu machine that has only Rust:
# the Vulkan loader and Mesa's Vulkan drivers (lavapipe runs every ruda kernel on the CPU when
# there is no GPU). CUDA needs nothing here: the NVIDIA driver is loaded at run time if present.
set -euo pipefail

have_lavapipe() {
  # Not `grep -q`: it exits at the first match, ldconfig then dies of SIGPIPE, and pipefail
  # turns that into a failure.
  ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 &&
    ldconfig -p | grep 'libvulkan\.so\.1' >/dev/null
}

if have_lavapipe; then
  exit 0
fi

sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "setup: run as root or install sudo" >&2; exit 1; }
  sudo="sudo"
fi
if ! command -v apt-get >/dev/null; then
  echo "setup: no apt-get; install your distribution's Vulkan loader and Mesa Vulkan drivers (lavapipe)" >&2
  exit 1
fi
echo "setup: installing the Vulkan loader and Mesa's Vulkan drivers"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends libvulkan1 mesa-vulkan-drivers >/dev/null
have_lavapipe || { echo "setup: Mesa's lavapipe driver is still missing" >&2; exit 1; }
