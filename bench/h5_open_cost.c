// Memory of open HDF5 files (results/scale.md, issue 16): opens every shard given and prints the RSS growth per file.
// mode 0: default access; 1: small metadata-cache config; 2: also no sieve buffer / chunk cache; 3: files only.
//   gcc -O1 bench/h5_open_cost.c -o /tmp/h5_open_cost -I/usr/include/hdf5/serial -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5
//   /tmp/h5_open_cost 3 runs/scale-7m/cache/train/shard-*.h5
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static long rss_kb(void){FILE*f=fopen("/proc/self/status","r");char l[256];long v=0;while(fgets(l,256,f))if(!strncmp(l,"VmRSS:",6))v=atol(l+6);fclose(f);return v;}
int main(int argc,char**argv){
  int mode=atoi(argv[1]); int n=argc-2;
  hid_t fapl=H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl,H5F_LIBVER_V110,H5F_LIBVER_V110);
  if(mode>=1){ H5AC_cache_config_t c; c.version=H5AC__CURR_CACHE_CONFIG_VERSION; H5Pget_mdc_config(fapl,&c);
    c.set_initial_size=1; c.initial_size=64*1024; c.min_size=32*1024; c.max_size=1024*1024; if(H5Pset_mdc_config(fapl,&c)<0) printf("mdc config refused\n");}
  if(mode>=2){ H5Pset_sieve_buf_size(fapl,0); H5Pset_cache(fapl,0,0,0,1.0);}
  hid_t dapl=H5Pcreate(H5P_DATASET_ACCESS); H5Pset_chunk_cache(dapl,0,0,1.0);
  long r0=rss_kb();
  for(int i=0;i<n;i++){ hid_t f=H5Fopen(argv[i+2],H5F_ACC_RDONLY,fapl);
    const char* ds[]={"noisy","ids","text_offsets","text"};
    for(int k=0;k<(mode==3?0:4);k++){hid_t d=H5Dopen2(f,ds[k],dapl); if(d<0){} }
  }
  printf("mode %d: %d files, RSS +%ld KB (%.1f KB/file)\n",mode,n,rss_kb()-r0,(rss_kb()-r0)/(double)n);
  return 0;}
