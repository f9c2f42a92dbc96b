#!/bin/bash
# csw.sh PID -- CMD: per-thread-name context switches (vol/invol) during CMD (threads new during CMD count from 0)
pid=$1; shift; shift
snap() { for t in /proc/$pid/task/*; do echo "$(cat $t/comm) $(grep -E '^(voluntary|nonvoluntary)_ctxt' $t/status | awk '{print $2}' | tr '\n' ' ')"; done | awk '{v[$1]+=$2; n[$1]+=$3} END {for (k in v) print k, v[k], n[k]}' | sort; }
snap > /tmp/csw.a; "$@"; snap > /tmp/csw.b
join -a 2 -e 0 -o 0,1.2,1.3,2.2,2.3 /tmp/csw.a /tmp/csw.b | awk '{dv=$4-$2; dn=$5-$3; if (dv+dn>0) printf "%-22s vol %6d invol %6d\n", $1, dv, dn}'
