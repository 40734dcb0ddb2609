// AMX's bf16 tile product (tdpbf16ps) on one core with random data: four accumulators, the A and B
// tiles loaded from a buffer of growing size (L1, L2, L3), four loads per four products or two
// (B held). What the tiles can do, and what feeding them from each cache level costs.
#include <immintrin.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
struct cfg { uint8_t palette, start; uint8_t r[14]; uint16_t colsb[16]; uint8_t rows[16]; };
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
int main(){
  syscall(SYS_arch_prctl, 0x1023, 18);
  struct cfg c; memset(&c,0,sizeof c); c.palette=1;
  for(int i=0;i<8;i++){c.colsb[i]=64;c.rows[i]=16;}
  _tile_loadconfig(&c);
  for(size_t sz=16<<10; sz<=(8<<20); sz*=2){
    uint16_t*buf=aligned_alloc(64,sz); for(size_t q=0;q<sz/2;q++){float f=rand()/(float)RAND_MAX-0.5f;uint32_t u;memcpy(&u,&f,4);buf[q]=u>>16;} size_t tiles=sz/1024;
    long n=2000000; static float o[256];
    _tile_zero(0);_tile_zero(1);_tile_zero(2);_tile_zero(3);
    for(int mode=0;mode<2;mode++){
    double t=now(); size_t j=0;
    for(long i=0;i<n;i++){ 
      _tile_loadd(4,buf+j*512,64); if(++j==tiles)j=0;
      _tile_loadd(5,buf+j*512,64); if(++j==tiles)j=0;
      if(mode==0){_tile_loadd(6,buf+j*512,64); if(++j==tiles)j=0;
      _tile_loadd(7,buf+j*512,64); if(++j==tiles)j=0;} else if(i==0){_tile_loadd(6,buf,64);_tile_loadd(7,buf,64);}
      _tile_dpbf16ps(0,4,6); _tile_dpbf16ps(1,4,7); _tile_dpbf16ps(2,5,6); _tile_dpbf16ps(3,5,7);}
    double d=now()-t; _tile_stored(0,o,64);
    printf("buffer %6zu KB, %d loads/4tdp: %.2f TF/s\n", sz>>10, mode?2:4, n*4*16384.0/d/1e12);}
    free(buf);}
  return 0;}
