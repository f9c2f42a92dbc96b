#!/bin/bash
for r in 1 2; do for b in before after4; do ./sysc.py /tmp/benchv4/bench-$b /tmp/benchv4/rnfsd | sed "s/^/$b /"; done; done
