#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <cephfs/libcephfs.h>
static int ninv=0, ndent=0;
static void ino_cb(void *h, vinodeno_t v, int64_t o, int64_t l){ ninv++; fprintf(stderr,"  [ino_cb %lx off %ld len %ld]\n", v.ino.val,o,l);}
static void dent_cb(void *h, vinodeno_t d, vinodeno_t i, const char *n, size_t len){ ndent++; fprintf(stderr,"  [dentry_cb dir %lx ino %lx %.*s]\n", d.ino.val,i.ino.val,(int)len,n);}
static struct ceph_mount_info *mnt(const char *conf){
  struct ceph_mount_info *m; ceph_create(&m,"admin"); ceph_conf_read_file(m,conf);
  ceph_conf_set(m,"client_acl_type","posix_acl");
  if (ceph_init(m)) {fprintf(stderr,"init\n");exit(1);} if (ceph_mount(m,"/")) {fprintf(stderr,"mount\n"); exit(1);} return m;}
static void show(const char *what, struct ceph_mount_info *m, Inode *in, UserPerm *p, int flags){
  struct ceph_statx st; int r=ceph_ll_getattr(m,in,&st,0xfff,flags,p);
  printf("%-28s r=%d mask=%#x mode=%o size=%lu nlink=%u mtime=%ld.%09ld\n",what,r,st.stx_mask,st.stx_mode,st.stx_size,st.stx_nlink,st.stx_mtime.tv_sec,st.stx_mtime.tv_nsec);
}
int main(int c, char **v){
  struct ceph_mount_info *a=mnt(v[1]), *b=mnt(v[1]);
  struct ceph_client_callback_args args={0}; args.handle=0; args.ino_cb=ino_cb; args.dentry_cb=dent_cb;
  ceph_ll_register_callbacks(a,&args);
  UserPerm *p=ceph_userperm_new(0,0,0,NULL);
  Inode *ra,*rb,*fa,*fb,*da; struct ceph_statx st; Fh *fh;
  ceph_ll_lookup_root(a,&ra); ceph_ll_lookup_root(b,&rb);
  char name[64]; sprintf(name,"probe%d",getpid());
  ceph_ll_mkdir(b,rb,name,0755,&da,&st,0xfff,0,p); Inode *db=da; 
  ceph_ll_create(b,db,"f",0644,O_RDWR|O_CREAT,&fb,&fh,&st,0xfff,0,p); ceph_ll_close(b,fh);
  Inode *dA; ceph_ll_lookup(a,ra,name,&dA,&st,0xfff,0,p);
  ceph_ll_lookup(a,dA,"f",&fa,&st,0xfff,0,p);
  show("A sync",a,fa,p,0); show("A dontsync",a,fa,p,AT_STATX_DONT_SYNC);
  printf("-- B chmod 600\n"); struct ceph_statx s2; s2.stx_mode=0600; ceph_ll_setattr(b,fb,&s2,CEPH_SETATTR_MODE,p);
  usleep(300000);
  show("A dontsync after chmod",a,fa,p,AT_STATX_DONT_SYNC); show("A sync",a,fa,p,0); show("A dontsync again",a,fa,p,AT_STATX_DONT_SYNC);
  printf("-- B write 5 bytes\n"); ceph_ll_open(b,fb,O_RDWR,&fh,p); ceph_ll_write(b,fh,0,5,"hello"); ceph_ll_fsync(b,fh,0); 
  usleep(300000);
  show("A dontsync after write",a,fa,p,AT_STATX_DONT_SYNC);
  ceph_ll_close(b,fh); usleep(300000);
  show("A dontsync after close",a,fa,p,AT_STATX_DONT_SYNC); show("A sync",a,fa,p,0);
  show("A dir dontsync",a,dA,p,AT_STATX_DONT_SYNC);
  printf("-- B create g in dir\n"); ceph_ll_create(b,db,"g",0644,O_RDWR|O_CREAT,&fb,&fh,&st,0xfff,0,p); ceph_ll_close(b,fh);
  usleep(300000);
  show("A dir dontsync after create",a,dA,p,AT_STATX_DONT_SYNC); show("A dir sync",a,dA,p,0);
  printf("-- B unlink f\n"); ceph_ll_unlink(b,db,"f",p); usleep(300000);
  show("A dir dontsync after unlink",a,dA,p,AT_STATX_DONT_SYNC);
  show("A f dontsync after unlink",a,fa,p,AT_STATX_DONT_SYNC);
  printf("ino_cb %d dentry_cb %d\n",ninv,ndent);
  fflush(stdout);
  return 0;
}
