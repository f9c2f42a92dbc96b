#!/bin/bash
# quiet.sh CMD...: run CMD under the bench lock with /work/QUIET present (created and removed here only if absent)
exec flock /work/bench.lock bash -c '
mine=0; if [ ! -e /work/QUIET ]; then echo "benchv4 $(date -u +%H:%M) client-cost run" > /work/QUIET; mine=1; fi
sleep 5
"$@"; rc=$?
[ $mine = 1 ] && rm -f /work/QUIET
exit $rc' _ "$@"
