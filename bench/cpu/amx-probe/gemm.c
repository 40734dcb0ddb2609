// A plain AMX bf16 GEMM (2x2 tiles of C, B packed in the tiles' pair-interleaved layout, K in
// chunks of KC) on the same shapes as mkl_rate.py, six different weights in turn (as six layers),
// checked against a double-precision product. Usage: gemm [KC] ; L=1 reuses one weight.
#include <immintrin.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>
#include <unistd.h>
#include <sys/syscall.h>
struct cfg { uint8_t palette, start; uint8_t r[14]; uint16_t colsb[16]; uint8_t rows[16]; };
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
// pack W (n x k bf16 row-major) into tiles [nb][kb][16 rows][16 cols][2]
static void pack(const uint16_t*w,int n,int k,uint16_t*p){
  int kbs=k/32;
  for(int nb=0;nb<n/16;nb++)for(int kb=0;kb<kbs;kb++){uint16_t*t=p+((size_t)nb*kbs+kb)*512;
    for(int r=0;r<16;r++)for(int c=0;c<16;c++){t[r*32+c*2]=w[(size_t)(nb*16+c)*k+kb*32+2*r];t[r*32+c*2+1]=w[(size_t)(nb*16+c)*k+kb*32+2*r+1];}}
}
static int KC=384;
// C[m x n] (+)= A[m x k] * W^T ; m multiple of 32
static void gemm(int m,int n,int k,const uint16_t*a,int lda,const uint16_t*p,float*c,int ldc,int acc){
  int kbs=k/32;
  for(int nb=0;nb<n/32;nb++){
    const uint16_t*p0=p+(size_t)(2*nb)*kbs*512,*p1=p+(size_t)(2*nb+1)*kbs*512;
    for(int k0=0;k0<kbs;k0+=KC/32){int k1=k0+KC/32; if(k1>kbs)k1=kbs;
      for(int mb=0;mb<m/32;mb++){
        float*c0=c+(size_t)mb*32*ldc+nb*32;
        if(k0==0&&!acc){_tile_zero(0);_tile_zero(1);_tile_zero(2);_tile_zero(3);}
        else{_tile_loadd(0,c0,ldc*4);_tile_loadd(1,c0+16,ldc*4);_tile_loadd(2,c0+16*ldc,ldc*4);_tile_loadd(3,c0+16*ldc+16,ldc*4);}
        const uint16_t*a0=a+(size_t)mb*32*lda;
        for(int kb=k0;kb<k1;kb++){
          _tile_loadd(4,a0+kb*32,lda*2);_tile_loadd(5,a0+16*lda+kb*32,lda*2);
          _tile_loadd(6,p0+(size_t)kb*512,64);_tile_loadd(7,p1+(size_t)kb*512,64);
          _tile_dpbf16ps(0,4,6);_tile_dpbf16ps(1,4,7);_tile_dpbf16ps(2,5,6);_tile_dpbf16ps(3,5,7);
        }
        _tile_stored(0,c0,ldc*4);_tile_stored(1,c0+16,ldc*4);_tile_stored(2,c0+16*ldc,ldc*4);_tile_stored(3,c0+16*ldc+16,ldc*4);
      }}}
}
static float bf(uint16_t x){uint32_t u=(uint32_t)x<<16;float f;memcpy(&f,&u,4);return f;}
int main(int argc,char**argv){
  if(argc>1)KC=atoi(argv[1]);
  syscall(SYS_arch_prctl, 0x1023, 18);
  struct cfg cf; memset(&cf,0,sizeof cf); cf.palette=1;
  for(int i=0;i<8;i++){cf.colsb[i]=64;cf.rows[i]=16;}
  _tile_loadconfig(&cf);
  int shapes[4][3]={{256,1152,1152},{256,384,1152},{256,1536,1152},{256,384,4608}};
  for(int s=0;s<4;s++){int m=shapes[s][0],n=shapes[s][1],k=shapes[s][2];
    // 6 distinct weights like 6 layers to avoid L2 reuse
    int L=getenv("L")?atoi(getenv("L")):6; uint16_t*a=aligned_alloc(64,(size_t)m*k*2); uint16_t*w=malloc((size_t)n*k*2);
    uint16_t*p[6]; float*c=aligned_alloc(64,(size_t)m*n*4);
    for(size_t i=0;i<(size_t)m*k;i++){float f=(rand()/(float)RAND_MAX-0.5f);uint32_t u;memcpy(&u,&f,4);a[i]=u>>16;}
    for(int l=0;l<L;l++){for(size_t i=0;i<(size_t)n*k;i++){float f=(rand()/(float)RAND_MAX-0.5f);uint32_t u;memcpy(&u,&f,4);w[i]=u>>16;}
      p[l]=aligned_alloc(64,(size_t)n*k*2);pack(w,n,k,p[l]);}
    // check last layer
    gemm(m,n,k,a,k,p[L-1],c,n,0); double err=0;
    for(int i=0;i<m;i+=37)for(int j=0;j<n;j+=13){double r=0;for(int q=0;q<k;q++)r+=(double)bf(a[(size_t)i*k+q])*bf(w[(size_t)j*k+q]);double e=fabs(r-c[(size_t)i*n+j]);if(e>err)err=e;}
    int reps=300; double t=now();
    for(int r=0;r<reps;r++)gemm(m,n,k,a,k,p[r%L],c,n,0);
    double d=(now()-t)/reps;
    printf("%d %d %d: %.2f TF/s (max err %.2e) KC=%d\n",m,n,k,2.0*m*n*k/d/1e12,err,KC);
  }
  _tile_release();return 0;}
