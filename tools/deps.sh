#!/bin/sh
# deps.sh run|test - make sure what the README's two commands need is here.
# Installs missing Debian packages when allowed (root, or passwordless sudo);
# otherwise stops with the one exact command to run.
need=""
have_check() { pkg-config --exists check 2>/dev/null; }
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
if [ "$1" = test ]; then
  have_check || need="$need check"
fi
command -v gnuplot >/dev/null 2>&1 || need="$need gnuplot-nox"
[ -z "$need" ] && exit 0

install="apt-get install -y$need"
if [ "$(id -u)" = 0 ]; then
  echo "deps: installing$need"
  { apt-get install -y -qq $need >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq $need >/dev/null; }; } && exit 0
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  echo "deps: installing$need (sudo)"
  sudo apt-get install -y -qq $need >/dev/null 2>&1 || { sudo apt-get update -qq && sudo apt-get install -y -qq $need; } && exit 0
fi
# gnuplot alone is optional: programs print a hint and go on without PNGs
case "$need" in
  " gnuplot-nox") echo "deps: gnuplot not found; PNG plots will be skipped (sudo $install)"; exit 0;;
esac
echo "deps: missing$need. Install them with:"
echo "    sudo $install"
exit 1
