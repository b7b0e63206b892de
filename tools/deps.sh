#!/bin/sh
# deps.sh run|test|install - make sure what the README's two commands need is here.
# Installs missing Debian packages when allowed (root, or passwordless sudo);
# otherwise stops with the one exact command to run.
# zlib's headers (zlib1g-dev) are needed: the library reads gzip with it.
# Four are optional, each installed on its own so one that cannot be had
# stops nothing: gnuplot (without it, no PNG plots), trans-de-en (the
# Ding dictionary, /usr/share/trans/de-en: without it, `--corpus ding` says
# how to install it, and its test says SKIP), and chapter 14's texts,
# dict-devil (The Devil's Dictionary) and fortunes-zh (the 300 Tang
# poems): without them, the text says how to install its package, and
# their tests say SKIP.
export DEBIAN_FRONTEND=noninteractive

# apt_install " pkg ...": 0 when they are installed now; 1 when they could
# not be, or we may not install (neither root nor passwordless sudo)
apt_install() {
  if [ "$(id -u)" = 0 ]; then
    echo "deps: installing$1"
    { apt-get install -y -qq $1 >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq $1 >/dev/null; }; }
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    echo "deps: installing$1 (sudo)"
    sudo apt-get install -y -qq $1 >/dev/null 2>&1 || { sudo apt-get update -qq && sudo apt-get install -y -qq $1; }
  else
    return 1
  fi
}

# deps.sh install WHO PKG...: those packages, for the tools that need more
# than the README's two commands (make parity, make bench-translate); WHO
# names the caller in the messages. Exit 1, with the command to run, when
# they cannot be installed here.
if [ "$1" = install ]; then
  who=$2; shift 2
  [ $# = 0 ] && exit 0
  apt_install " $*" && exit 0
  echo "$who: missing $*. Install them with:"
  echo "    sudo apt-get install -y $*"
  exit 1
fi

need=""
opt=""
have_check() { pkg-config --exists check 2>/dev/null; }
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
[ -r /usr/include/zlib.h ] || need="$need zlib1g-dev"
if [ "$1" = test ]; then
  have_check || need="$need check"
fi
command -v gnuplot >/dev/null 2>&1 || opt="$opt gnuplot-nox"
[ -r /usr/share/trans/de-en ] || opt="$opt trans-de-en"
[ -r /usr/share/dictd/devil.dict.dz ] || opt="$opt dict-devil"
[ -r /usr/share/games/fortunes/tang300 ] || opt="$opt fortunes-zh"
[ -z "$need$opt" ] && exit 0

if [ -n "$need" ] && ! apt_install "$need"; then
  echo "deps: missing$need. Install them with:"
  echo "    sudo apt-get install -y$need$opt"
  exit 1
fi
for p in $opt; do
  apt_install " $p" && continue
  case $p in
    gnuplot-nox) echo "deps: gnuplot not found; PNG plots will be skipped (sudo apt-get install -y gnuplot-nox)";;
    trans-de-en) echo "deps: trans-de-en not found; --corpus ding needs it, the rest runs without (sudo apt-get install -y trans-de-en)";;
    dict-devil) echo "deps: dict-devil not found; chapter 14's default text needs it, the rest runs without (sudo apt-get install -y dict-devil)";;
    fortunes-zh) echo "deps: fortunes-zh not found; chapter 14's --text tang300 needs it, the rest runs without (sudo apt-get install -y fortunes-zh)";;
  esac
done
exit 0
