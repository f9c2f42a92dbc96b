import cephfs, time, os, json, subprocess
fs = cephfs.LibCephFS(conffile='/tmp/ceph-fsm/ceph.conf')
fs.mount()
def mds():
    j=json.loads(subprocess.check_output(['ceph','--admin-daemon','/tmp/ceph-fsm/run/mds.a.asok','perf','dump']))
    return j['mds_server']['handle_client_session'], j['mds']['handle_client_caps'], j['mds_log']['jlat']['avgcount']
b=mds(); s=time.time()
for i in range(20):
    fs.mkdir(f'/t/e{i}-{time.time()}', 0o755)
    fs.sync_fs()
a=mds(); print('mkdir+sync_fs x20: sessions, caps, journal writes', [x-y for x,y in zip(a,b)], '%.1f ms each'%((time.time()-s)*50))
b=mds(); s=time.time()
for i in range(20):
    fs.mkdir(f'/t/f{i}-{time.time()}', 0o755)
a=mds(); print('mkdir x20: sessions, caps, journal writes', [x-y for x,y in zip(a,b)], '%.1f ms each'%((time.time()-s)*50))
fs.shutdown()
