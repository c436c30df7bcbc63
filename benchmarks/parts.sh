# Sourced by benchmarks/cuvs/ and benchmarks/cugraph/: a tarball too large for one call of the lent GPU machine
# (64 MiB a call) travels in parts, one carried folder each, and is put back together there.
#   parts_split TARBALL NAME DEST   here: TARBALL in parts under 55,000,000 bytes (a part and the working tree
#                                   stay under a call's 64 MiB) as DEST/.dev-NAME1/part1, DEST/.dev-NAME2/part2, ...,
#                                   the whole's sha256 beside the first as NAME.sha256
#   parts_stash DIR HOME NAME       there: the part(s) of one carried folder to HOME/parts (the first starts a set)
#   parts_join HOME NAME            there: the parts' sha256 checked against NAME.sha256, the whole to stdout
PARTS_BYTES=55000000

parts_split() {
  local tarball=$1 name=$2 dest=$3 i=1 p
  sha256sum "$tarball" | cut -d' ' -f1 > "$tarball.sha256"
  rm -rf "$dest"/.dev-"$name"[0-9]* "$tarball".part.*
  split -b "$PARTS_BYTES" -d -a 1 "$tarball" "$tarball.part."
  for p in "$tarball".part.*; do
    mkdir -p "$dest/.dev-$name$i" && mv "$p" "$dest/.dev-$name$i/part$i" && i=$((i + 1))
  done
  cp "$tarball.sha256" "$dest/.dev-${name}1/$name.sha256"
  echo "parts: $((i - 1)); sha256 $(cat "$tarball.sha256")"
}

parts_stash() {
  local dir=$1 home=$2 name=$3
  [ -f "$dir/$name.sha256" ] && rm -rf "$home/parts"  # the first part starts a new set
  mkdir -p "$home/parts"
  cp "$dir"/* "$home/parts/"
  ls -la "$home/parts"
}

parts_join() {
  local home=$1 name=$2 want got
  want=$(cat "$home/parts/$name.sha256")
  got=$(cd "$home/parts" && ls part* | sort -V | xargs cat | sha256sum | cut -d' ' -f1)
  [ "$want" = "$got" ] || { echo "parts do not add up: sha256 $got, want $want (parts: $(cd "$home/parts" && ls part* | xargs))" >&2; return 1; }
  (cd "$home/parts" && ls part* | sort -V | xargs cat)
}
