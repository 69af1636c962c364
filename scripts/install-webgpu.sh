#!/usr/bin/env bash
# Sets up the WebGPU test runtime: Dawn's Node bindings (npm package `webgpu`, pinned by
# tests/webgpu/package-lock.json) on Mesa's software Vulkan driver, lavapipe.
#
# Why not the system Mesa: Debian 12's lavapipe (Mesa 22.3) lacks a Vulkan feature Dawn requires
# (dynamic indexing of uniform arrays), so Dawn offers no adapter. The bookworm-backports suite
# carries a Mesa whose lavapipe Dawn accepts, with shader-f16. We fetch that driver and the two
# libdrm libraries it needs with `apt-get download` through a private apt configuration (the
# system's sources and installed Mesa stay untouched) and unpack them under .deps/webgpu/.
# tests/webgpu/gpu.mjs finds the driver there by itself.
#
# Idempotent: each stage is skipped when its result is already present.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$repo/.deps/webgpu"
backports_pkgs=(mesa-vulkan-drivers libdrm2 libdrm-amdgpu1)

# The Debian mirror the machine already uses, read from its apt sources (deb822 first, then the
# one-line format), so that no host name lives in the repository.
debian_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -e "$f" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
         /(^|\n)Suites:[^\n]*(^|[ \t])bookworm([ \t]|\n|$)/ {
           for (i = 1; i <= NF; i++) if ($i ~ /^URIs:/) { split($i, u, /[ \t]+/); print u[2]; exit }
         }' "$f"
  done | head -n 1 | grep . && return
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i ~ /:\/\//) { if ($(i+1) == "bookworm") { print $i; exit } } }' |
    head -n 1 | grep .
}

fetch_driver() {
  local mirror apt_dir opts
  mirror="$(debian_mirror)" || { echo "install-webgpu: no Debian bookworm mirror in /etc/apt" >&2; exit 1; }
  apt_dir="$root/apt"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/parts" "$root/debs"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm-backports main" \
    >"$apt_dir/backports.list"
  opts=(-o "Dir::Etc::SourceList=$apt_dir/backports.list" -o "Dir::Etc::SourceParts=$apt_dir/parts"
        -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o "APT::Sandbox::User=root")
  echo "install-webgpu: fetching ${backports_pkgs[*]} from bookworm-backports"
  apt-get "${opts[@]}" -q update
  (cd "$root/debs" && rm -f ./*.deb &&
     apt-get "${opts[@]}" -q download "${backports_pkgs[@]/%//bookworm-backports}")
  rm -rf "$root/driver"
  local deb
  for deb in "$root/debs"/*.deb; do dpkg-deb -x "$deb" "$root/driver"; done
}

icd="$root/driver/usr/share/vulkan/icd.d/lvp_icd.json"
lib="$root/driver/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so"
if [ -f "$icd" ] && [ -f "$lib" ]; then
  echo "install-webgpu: lavapipe present in .deps/webgpu/driver"
else
  fetch_driver
fi
# The ICD file names its library by a system path; ours points at the unpacked copy.
sed -E "s#\"library_path\": *\"[^\"]*\"#\"library_path\": \"$lib\"#" "$icd" >"$root/lvp_icd.json"

if [ -f "$repo/tests/webgpu/node_modules/webgpu/package.json" ]; then
  echo "install-webgpu: tests/webgpu/node_modules present"
else
  (cd "$repo/tests/webgpu" && npm ci --no-audit --no-fund)
fi
