#!/bin/bash
# alternated cache-reclaim-mount.sh --quick rounds: variants by server args
cd /work/main
out=/tmp/s004ab; mkdir -p $out
for r in 1 2 3; do
  for v in on off on19 off19; do
    case $v in on) a="";; off) a="--no-inline-misses";; on19) a="--blocking-nice 19";; off19) a="--no-inline-misses --blocking-nice 19";; esac
    timeout 600 scripts/cache-reclaim-mount.sh --quick --server-args "$a" --out $out/$v-$r > $out/$v-$r.log 2>&1
    echo "$v r$r: $(grep -iE 'beside misses' $out/$v-$r/summary.md | head -3 | tr '\n' ' ')"
  done
done
