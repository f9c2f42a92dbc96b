#define _FILE_OFFSET_BITS 64
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <time.h>
#include <cephfs/libcephfs.h>
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(int c, char **v){
  struct ceph_mount_info *m; ceph_create(&m,"admin"); ceph_conf_read_file(m,v[1]);
  {int rr=ceph_conf_set(m,"client_dirsize_rbytes",v[3]); char buf[64]; ceph_conf_get(m,"client_dirsize_rbytes",buf,64); printf("conf_set %d -> %s\n",rr,buf);}
  if (ceph_init(m)||ceph_mount(m,"/")) return 1;
  UserPerm *p=ceph_userperm_new(0,0,0,NULL);
  Inode *r,*d; struct ceph_statx st; ceph_ll_lookup_root(m,&r);
  Inode *b; ceph_ll_lookup(m,r,"bench",&b,&st,0xfff,0,p); ceph_ll_lookup(m,b,v[2],&d,&st,0xfff,0,p);
  for (int pass=0; pass<3; pass++){
    struct ceph_dir_result *dr; ceph_ll_opendir(m,d,&dr,p);
    struct dirent de; Inode *i; int n=0; double t=now();
    if (v[4][0]==0x72) { while (ceph_readdir_r(m,dr,&de)==1) n++; } else while (ceph_readdirplus_r(m,dr,&de,&st,(unsigned)strtoul(v[4],0,0),(unsigned)strtoul(v[5],0,0),&i)==1){ n++; if(i) ceph_ll_put(m,i);} 
    printf("pass %d: %d entries %.0f us\n",pass,n,now()-t); ceph_ll_releasedir(m,dr);
    t=now(); for(int k=0;k<100;k++) ceph_ll_getattr(m,d,&st,0xfff,0,p); printf("  100 getattr of dir: %.0f us\n", now()-t);
  }
  return 0;
}
