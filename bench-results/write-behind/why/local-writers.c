#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
static int fd, nthreads, wb, lock;
static long total = 256L << 20, chunk = 1 << 20;
static atomic_long next, written, queued;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static char *buf;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static void *writer(void *a){
  for(;;){ long i = atomic_fetch_add(&next,1); long off=i*chunk; if(off>=total) break;
    if(lock) pthread_mutex_lock(&m);
    if(pwrite(fd,buf,chunk,off)!=chunk){perror("pwrite");exit(1);}
    if(lock) pthread_mutex_unlock(&m);
    atomic_fetch_add(&written,chunk);}
  return 0;}
static volatile int done;
static void *behind(void *a){ long last=0; while(!done){ long w=atomic_load(&written); if(w-last>=(4<<20)){ sync_file_range(fd,0,0,SYNC_FILE_RANGE_WRITE); last=w;} else usleep(200);} return 0;}
int main(int c,char**v){ nthreads=atoi(v[2]); wb=atoi(v[3]); lock=atoi(v[4]);
  fd=open(v[1],O_CREAT|O_TRUNC|O_WRONLY,0644); buf=malloc(chunk); memset(buf,0x5a,chunk);
  pthread_t t[64],b; struct rusage r0,r1; getrusage(RUSAGE_SELF,&r0); double s=now();
  if(wb) pthread_create(&b,0,behind,0);
  for(int i=0;i<nthreads;i++) pthread_create(&t[i],0,writer,0);
  for(int i=0;i<nthreads;i++) pthread_join(t[i],0);
  double w=now(); done=1; if(wb) pthread_join(b,0);
  fsync(fd); double e=now(); getrusage(RUSAGE_SELF,&r1);
  double cpu=(r1.ru_utime.tv_sec-r0.ru_utime.tv_sec)+(r1.ru_stime.tv_sec-r0.ru_stime.tv_sec)+((r1.ru_utime.tv_usec-r0.ru_utime.tv_usec)+(r1.ru_stime.tv_usec-r0.ru_stime.tv_usec))/1e6;
  printf("thr=%d wb=%d lock=%d write=%.3fs fsync=%.3fs total=%.0fMB/s wire=%.0fMB/s cpu/MiB=%.0fus csw=%ld\n",nthreads,wb,lock,w-s,e-w,total/1e6/(e-s),total/1e6/(w-s),cpu*1e6/256,(r1.ru_nvcsw+r1.ru_nivcsw)-(r0.ru_nvcsw+r0.ru_nivcsw));
  return 0;}
