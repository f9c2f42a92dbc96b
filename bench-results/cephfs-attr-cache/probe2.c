#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <time.h>
#include <cephfs/libcephfs.h>
static struct ceph_mount_info *mnt(const char *conf){
  struct ceph_mount_info *m; ceph_create(&m,"admin"); ceph_conf_read_file(m,conf);
  if (ceph_init(m)) exit(1); if (ceph_mount(m,"/")) exit(1); return m;}
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec*1e6+t.tv_nsec/1e3;}
static void caps(const char *w, struct ceph_mount_info *m, Inode *in, UserPerm *p){
  char buf[256]={0}; double t=now(); int r=ceph_ll_getxattr(m,in,"ceph.caps",buf,sizeof buf-1,p); double t2=now();
  struct ceph_statx st; double t3=now(); ceph_ll_getattr(m,in,&st,0xfff,0,p); double t4=now();
  printf("%-24s caps r=%d '%s' %.0fus; sync getattr %.0fus mode %o\n",w,r,r>0?buf:"",t2-t,t4-t3, st.stx_mode);
}
int main(int c, char **v){
  struct ceph_mount_info *a=mnt(v[1]), *b=mnt(v[1]);
  UserPerm *p=ceph_userperm_new(0,0,0,NULL);
  Inode *ra,*rb,*fa,*fb; struct ceph_statx st; Fh *fh;
  ceph_ll_lookup_root(a,&ra); ceph_ll_lookup_root(b,&rb);
  char name[64]; sprintf(name,"probe2-%d",getpid());
  ceph_ll_create(b,rb,name,0644,O_RDWR|O_CREAT,&fb,&fh,&st,0xfff,0,p); ceph_ll_close(b,fh);
  ceph_ll_lookup(a,ra,name,&fa,&st,0xfff,0,p);
  caps("A first",a,fa,p); caps("A again",a,fa,p); caps("A again",a,fa,p);
  struct ceph_statx s2; s2.stx_mode=0600; ceph_ll_setattr(b,fb,&s2,CEPH_SETATTR_MODE,p); usleep(200000);
  caps("A after B chmod",a,fa,p); caps("A again",a,fa,p);
  caps("root",a,ra,p);
  ceph_ll_unlink(b,rb,name,p);
  return 0;
}
