#!/bin/bash
for r in 1 2 3; do
  for b in before after4; do
    ./cpu.py /tmp/benchv4/bench-$b /tmp/benchv4/rnfsd 1 2 8 | sed "s/^/$b /"
  done
done
