#!/bin/bash
# batches.sh BIN "NAME=BENCH..." ROUNDS SECS "VERS..." [server flags]: GETATTR, 1000
# non-root handles, 64 calls on one connection, against one rnfsd (BIN), each
# rnfsd-bench build and version in turn per round. Per run: calls/s, server
# and bench CPU per call (the bench's from time(1), its walk included),
# replies per socket write and records per epoll_wait (rnfsd stats --json),
# syscalls per call (perf's syscall tracepoints, which stop nothing; they
# add a little to every syscall, so rates run a little under compare.sh's).
# Works in /tmp/prof (export/: rnfsd-bench prepare, 1,200 files of 2 KiB).
B=$1 BENCHES=$2 R=$3 SEC=$4 VL=$5; shift 5; BENCH=${BENCHES%% *}; BENCH=${BENCH#*=}
P=/tmp/prof
[ -d $P/export ] || $BENCH prepare $P/export --files 1200 --dirs 20 --file-size 2 >/dev/null
rm -rf $P/state $P/port; mkdir -p $P/state
$B serve $P/export --listen 127.0.0.1:0 --port-file $P/port --state-dir $P/state --no-rpcbind --no-root-squash --insecure --log-level warn "$@" >$P/srv.log 2>&1 &
SP=$!; for i in $(seq 100); do [ -s $P/port ] && break; sleep 0.1; done
PORT=$(cat $P/port)
EV=syscalls:sys_enter_recvfrom,syscalls:sys_enter_recvmsg,syscalls:sys_enter_read,syscalls:sys_enter_readv,syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendto,syscalls:sys_enter_writev,syscalls:sys_enter_write,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex,context-switches
for r in $(seq $R); do for BL in $BENCHES; do BENCH=${BL#*=}; BN=${BL%%=*}; for V in $VL; do
  s0=$($B stats --state-dir $P/state --json 2>/dev/null)
  perf stat -x, -e $EV -p $SP -o $P/perf.txt &
  PP=$!
  /usr/bin/time -o $P/time.txt -f "%U %S" $BENCH run --addr 127.0.0.1:$PORT --vers $V --export $P/export --mix getattr --handles 1000 --streams 64 --conns 1 --seconds $SEC --server-pid $SP --json $P/m.json >/dev/null 2>&1
  kill -INT $PP; wait $PP
  s1=$($B stats --state-dir $P/state --json 2>/dev/null)
  python3 - "$BN:$V" "$s0" "$s1" <<'PY'
import json,sys,re
V,s0,s1=sys.argv[1:4]
j=json.loads(open('/tmp/prof/m.json').read().strip().split('\n')[-1])
open('/tmp/prof/m.json','w').close()
n=j['calls']+j['warmup_calls']
u,sy=map(float,open('/tmp/prof/time.txt').read().split()[-2:])
def kv(s):
    j=json.loads(s); d={}
    for t in j['transports']:
        for k,v in t['connections'].items():
            if isinstance(v,int): d[k]=d.get(k,0)+v
    return d
a,b=kv(s0),kv(s1)
dd={k:b[k]-a.get(k,0) for k in b}
ro=sum(v for k,v in dd.items() if k.endswith('replies_out')); wo=sum(v for k,v in dd.items() if k.endswith('writes_out'))
sc={}
for l in open('/tmp/prof/perf.txt'):
    f=l.strip().split(',')
    if len(f)>3 and f[0].replace('.','').isdigit(): sc[f[2].replace('syscalls:sys_enter_','')]=int(float(f[0]))
tot=sum(v for k,v in sc.items() if k!='context-switches')
ri=dd.get('records_in',0)/max(sc.get('epoll_wait',0)+sc.get('epoll_pwait',0),1)
print(f"{V:9} {j['calls_per_s']:9.0f}/s cpu {j['server_cpu_us_per_call']:.2f}us bench {(u+sy)*1e6/n:.2f}us rep/write {ro/max(wo,1):5.1f} rec/epoll {ri:5.1f} sys/call {tot/n:.3f} "+" ".join(f"{k}={v/n:.3f}" for k,v in sorted(sc.items()) if v))
PY
done; done; done
kill -INT $SP; wait $SP
