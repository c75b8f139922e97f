/* offer.c: what offering PMIx to a job that never speaks it would cost a
   daemon, had `--pmi auto` offered it to every job (docs/mpi.md "Open MPI
   (PMIx)"): PMIx_server_init once, then per job the namespace with the keys
   Open MPI reads, register_client + setup_fork for each process, and the
   deregistrations. No client ever connects.

     cc -O2 -o /tmp/offer scripts/pmixoffer/offer.c $(pkg-config --cflags --libs pmix)
     /tmp/offer 28 50        # 28 processes per job, 50 jobs */
#include <pmix_server.h>
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
static pmix_server_module_t mod;
int main(int argc,char**argv){
  int n = argc>1?atoi(argv[1]):28, jobs = argc>2?atoi(argv[2]):50;
  char tmp[]="/tmp/pmixoffer.XXXXXX"; if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
  pmix_info_t info[1]; PMIX_INFO_LOAD(&info[0], PMIX_SERVER_TMPDIR, tmp, PMIX_STRING);
  double t0=now();
  if (PMIx_server_init(&mod, info, 1)!=PMIX_SUCCESS){fprintf(stderr,"init failed\n");return 1;}
  double t1=now();
  printf("server_init %.3f ms\n", t1-t0);
  char *nodemap=NULL,*procmap=NULL; char host[256]; gethostname(host,sizeof host);
  PMIx_generate_regex(host,&nodemap);
  char ranks[4096]=""; for(int i=0;i<n;i++){char b[16];snprintf(b,sizeof b,"%s%d",i?",":"",i);strcat(ranks,b);}
  PMIx_generate_ppn(ranks,&procmap);
  double sum=0, sumfork=0;
  for (int j=0;j<jobs;j++){
    pmix_nspace_t ns; memset(ns,0,sizeof ns); snprintf(ns,sizeof ns,"dvm.%d",j+1);
    double a=now();
    size_t ninfo=10+n; pmix_info_t *ji; PMIX_INFO_CREATE(ji,ninfo);
    uint32_t u=n; PMIX_INFO_LOAD(&ji[0],PMIX_UNIV_SIZE,&u,PMIX_UINT32);
    PMIX_INFO_LOAD(&ji[1],PMIX_JOB_SIZE,&u,PMIX_UINT32);
    PMIX_INFO_LOAD(&ji[2],PMIX_JOBID,ns,PMIX_STRING);
    PMIX_INFO_LOAD(&ji[3],PMIX_NODE_MAP,nodemap,PMIX_REGEX);
    PMIX_INFO_LOAD(&ji[4],PMIX_PROC_MAP,procmap,PMIX_REGEX);
    PMIX_INFO_LOAD(&ji[5],PMIX_LOCAL_SIZE,&u,PMIX_UINT32);
    PMIX_INFO_LOAD(&ji[6],PMIX_LOCAL_PEERS,ranks,PMIX_STRING);
    uint32_t z=0; PMIX_INFO_LOAD(&ji[7],PMIX_NODEID,&z,PMIX_UINT32);
    PMIX_INFO_LOAD(&ji[8],PMIX_MAX_PROCS,&u,PMIX_UINT32);
    PMIX_INFO_LOAD(&ji[9],PMIX_NUM_NODES,&u,PMIX_UINT32);
    for(int r=0;r<n;r++){
      pmix_data_array_t *da; PMIX_DATA_ARRAY_CREATE(da,5,PMIX_INFO); pmix_info_t *pi=da->array;
      pmix_rank_t rk=r; uint16_t lr=r; uint32_t app=0;
      PMIX_INFO_LOAD(&pi[0],PMIX_RANK,&rk,PMIX_PROC_RANK);
      PMIX_INFO_LOAD(&pi[1],PMIX_LOCAL_RANK,&lr,PMIX_UINT16);
      PMIX_INFO_LOAD(&pi[2],PMIX_NODE_RANK,&lr,PMIX_UINT16);
      PMIX_INFO_LOAD(&pi[3],PMIX_HOSTNAME,host,PMIX_STRING);
      PMIX_INFO_LOAD(&pi[4],PMIX_APPNUM,&app,PMIX_UINT32);
      PMIX_INFO_LOAD(&ji[10+r],PMIX_PROC_DATA,da,PMIX_DATA_ARRAY);
      PMIX_DATA_ARRAY_FREE(da);
    }
    pmix_status_t rc=PMIx_server_register_nspace(ns,n,ji,ninfo,NULL,NULL);
    if(rc!=PMIX_SUCCESS && rc!=PMIX_OPERATION_SUCCEEDED){fprintf(stderr,"register_nspace: %s\n",PMIx_Error_string(rc));return 1;}
    double b=now();
    for(int r=0;r<n;r++){
      pmix_proc_t p; PMIX_PROC_LOAD(&p,ns,r);
      PMIx_server_register_client(&p,getuid(),getgid(),NULL,NULL,NULL);
      char **env=NULL; PMIx_server_setup_fork(&p,&env);
      for(char**e=env;e&&*e;e++) free(*e);
      free(env);
    }
    double c=now();
    for(int r=0;r<n;r++){pmix_proc_t p; PMIX_PROC_LOAD(&p,ns,r); PMIx_server_deregister_client(&p,NULL,NULL);}
    PMIx_server_deregister_nspace(ns,NULL,NULL);
    double d=now();
    PMIX_INFO_FREE(ji,ninfo);
    if(j>0){sum+=d-a; sumfork+=c-b;}
    if(j<3) printf("job %d: register_nspace %.3f ms, %dx(register_client+setup_fork) %.3f ms, deregister %.3f ms\n", j, b-a, n, c-b, d-c);
  }
  printf("mean over %d jobs: %.3f ms per job of %d (of which clients+setup_fork %.3f ms)\n", jobs-1, sum/(jobs-1), n, sumfork/(jobs-1));
  double f0=now(); PMIx_server_finalize(); printf("server_finalize %.3f ms\n", now()-f0);
  free(nodemap); free(procmap);
  char rm[128]; snprintf(rm,sizeof rm,"rm -rf %s",tmp); /* the server's rendezvous files */
  if (system(rm)!=0) fprintf(stderr,"could not remove %s\n",tmp);
  return 0;
}
