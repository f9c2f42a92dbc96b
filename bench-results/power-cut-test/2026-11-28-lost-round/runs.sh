#!/bin/bash
R=/tmp/powercut-runs/run.sh
for f in 0 50 100 150; do $R rotation $f 50 RNFSD_CRASH_CLIENTS=4; done
for f in 0 50 100 150; do $R mixed32k $f 50 RNFSD_CRASH_CLIENTS=4 RNFSD_CRASH_KIND=mixed RNFSD_CRASH_WRITE_BLOCKS=8; done
#!/bin/bash
R=/tmp/powercut-runs/run.sh
for f in 200 300 400 500; do $R mixed32k $f 100 RNFSD_CRASH_CLIENTS=4 RNFSD_CRASH_KIND=mixed RNFSD_CRASH_WRITE_BLOCKS=8; done
$R mixed32k-dio 0 100 RNFSD_CRASH_CLIENTS=4 RNFSD_CRASH_KIND=mixed RNFSD_CRASH_WRITE_BLOCKS=8 RNFSD_CRASH_LOOP_DIO=1
$R mixed256k-6c 0 100 RNFSD_CRASH_KIND=mixed RNFSD_CRASH_WRITE_BLOCKS=64
/tmp/powercut-local/rounds.sh 200 > /tmp/powercut-runs/local-cutload-200.log 2>&1
#!/bin/bash
R=/tmp/powercut-runs/run.sh
while pgrep -f all2.sh >/dev/null; do sleep 20; done
for f in 0 100; do $R mixed32k-wb4m $f 100 RNFSD_CRASH_CLIENTS=4 RNFSD_CRASH_KIND=mixed RNFSD_CRASH_WRITE_BLOCKS=8 RNFSD_CRASH_WRITE_BEHIND=4194304; done
$R mixed32k-xfs 0 100 RNFSD_CRASH_CLIENTS=4 RNFSD_CRASH_KIND=mixed RNFSD_CRASH_WRITE_BLOCKS=8 RNFSD_CRASH_FS=xfs
