/* The FPU, SSE, AVX and AVX-512 state across a trap on a thread under the program's own filter
 * (which allows write and exit alone), where the runtime returns to the program by hand (xrstor
 * and iretq from the frame, no rt_sigreturn): the vector registers (zmm0-31 and k0-7 where the
 * CPU has avx512f, else ymm0-15, else xmm0-15), MXCSR, the x87 control word and two x87
 * registers are set to known values, a write is made with a `syscall` of this program's own
 * (so that it traps under coreplane), and each is checked after it. Prints what differs, and
 * "vector state kept (WIDTH)"; exits 77 where filters are refused. */
#define _GNU_SOURCE
#include <cpuid.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "write_only_filter.h"

static uint8_t in[32][64] __attribute__((aligned(64))), out[32][64] __attribute__((aligned(64)));
static uint64_t kin[8], kout[8];
static const char msg[] = "write under the filter\n";

/* XCR0 says which state the kernel enabled (bit 1 SSE, 2 AVX, 5-7 AVX-512). */
static int width(void) {
    unsigned a, b, c, d;
    __cpuid(1, a, b, c, d);
    if (!(c & bit_OSXSAVE))
        return 128;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    __cpuid_count(7, 0, a, b, c, d);
    if ((lo & 0xe6) == 0xe6 && (b & bit_AVX512F))
        return 512;
    return (lo & 6) == 6 ? 256 : 128;
}

#define XMM "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", \
            "xmm12", "xmm13", "xmm14", "xmm15"

/* Loads the registers, makes write(1, msg, len) with its own syscall, stores them: returns the
 * call's result; mxcsr/fcw/x87 out too. */
__attribute__((target("avx512f"), noinline))
static long traced_write_512(unsigned *mp, unsigned short *fp, double *x87_out) {
    long r;
    {
        __asm__ volatile(
            "ldmxcsr %[m]\n fldcw %[f]\n fld1\n fldl 16(%[x87])\n"
            "kmovq 0(%[kin]), %%k0\n kmovq 8(%[kin]), %%k1\n kmovq 16(%[kin]), %%k2\n kmovq 24(%[kin]), %%k3\n"
            "kmovq 32(%[kin]), %%k4\n kmovq 40(%[kin]), %%k5\n kmovq 48(%[kin]), %%k6\n kmovq 56(%[kin]), %%k7\n"
#define L(i) "vmovdqu64 " #i "*64(%[in]), %%zmm" #i "\n"
            L(0) L(1) L(2) L(3) L(4) L(5) L(6) L(7) L(8) L(9) L(10) L(11) L(12) L(13) L(14) L(15)
            L(16) L(17) L(18) L(19) L(20) L(21) L(22) L(23) L(24) L(25) L(26) L(27) L(28) L(29) L(30) L(31)
            "syscall\n"
#define S(i) "vmovdqu64 %%zmm" #i ", " #i "*64(%[out])\n"
            S(0) S(1) S(2) S(3) S(4) S(5) S(6) S(7) S(8) S(9) S(10) S(11) S(12) S(13) S(14) S(15)
            S(16) S(17) S(18) S(19) S(20) S(21) S(22) S(23) S(24) S(25) S(26) S(27) S(28) S(29) S(30) S(31)
            "kmovq %%k0, 0(%[kout])\n kmovq %%k1, 8(%[kout])\n kmovq %%k2, 16(%[kout])\n kmovq %%k3, 24(%[kout])\n"
            "kmovq %%k4, 32(%[kout])\n kmovq %%k5, 40(%[kout])\n kmovq %%k6, 48(%[kout])\n kmovq %%k7, 56(%[kout])\n"
            "stmxcsr %[m]\n fnstcw %[f]\n fstpl 0(%[x87])\n fstpl 8(%[x87])\n vzeroupper\n"
            : "=a"(r), [m] "+m"(*mp), [f] "+m"(*fp)
            : "a"(1L), "D"(1L), "S"(msg), "d"(sizeof msg - 1), [in] "r"(in), [out] "r"(out), [kin] "r"(kin),
              [kout] "r"(kout), [x87] "r"(x87_out)
            : "rcx", "r11", "memory", "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", XMM, "xmm16", "xmm17",
              "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28",
              "xmm29", "xmm30", "xmm31");
    }
    return r;
}

__attribute__((noinline))
static long traced_write(int w, unsigned mxcsr_in, unsigned short fcw_in, unsigned *mxcsr_out,
                         unsigned short *fcw_out, double *x87_out) {
    long r;
    unsigned m = mxcsr_in;
    unsigned short f = fcw_in;
    if (w == 512) {
        r = traced_write_512(&m, &f, x87_out);
    } else if (w == 256) {
        __asm__ volatile(
            "ldmxcsr %[m]\n fldcw %[f]\n fld1\n fldl 16(%[x87])\n"
#define LY(i) "vmovdqu " #i "*64(%[in]), %%ymm" #i "\n"
            LY(0) LY(1) LY(2) LY(3) LY(4) LY(5) LY(6) LY(7) LY(8) LY(9) LY(10) LY(11) LY(12) LY(13) LY(14) LY(15)
            "syscall\n"
#define SY(i) "vmovdqu %%ymm" #i ", " #i "*64(%[out])\n"
            SY(0) SY(1) SY(2) SY(3) SY(4) SY(5) SY(6) SY(7) SY(8) SY(9) SY(10) SY(11) SY(12) SY(13) SY(14) SY(15)
            "stmxcsr %[m]\n fnstcw %[f]\n fstpl 0(%[x87])\n fstpl 8(%[x87])\n vzeroupper\n"
            : "=a"(r), [m] "+m"(m), [f] "+m"(f)
            : "a"(1L), "D"(1L), "S"(msg), "d"(sizeof msg - 1), [in] "r"(in), [out] "r"(out), [x87] "r"(x87_out)
            : "rcx", "r11", "memory", XMM);
    } else {
        __asm__ volatile(
            "ldmxcsr %[m]\n fldcw %[f]\n fld1\n fldl 16(%[x87])\n"
#define LX(i) "movdqu " #i "*64(%[in]), %%xmm" #i "\n"
            LX(0) LX(1) LX(2) LX(3) LX(4) LX(5) LX(6) LX(7) LX(8) LX(9) LX(10) LX(11) LX(12) LX(13) LX(14) LX(15)
            "syscall\n"
#define SX(i) "movdqu %%xmm" #i ", " #i "*64(%[out])\n"
            SX(0) SX(1) SX(2) SX(3) SX(4) SX(5) SX(6) SX(7) SX(8) SX(9) SX(10) SX(11) SX(12) SX(13) SX(14) SX(15)
            "stmxcsr %[m]\n fnstcw %[f]\n fstpl 0(%[x87])\n fstpl 8(%[x87])\n"
            : "=a"(r), [m] "+m"(m), [f] "+m"(f)
            : "a"(1L), "D"(1L), "S"(msg), "d"(sizeof msg - 1), [in] "r"(in), [out] "r"(out), [x87] "r"(x87_out)
            : "rcx", "r11", "memory", XMM);
    }
    *mxcsr_out = m;
    *fcw_out = f;
    return r;
}

int main(void) {
    int w = width();
    int regs = w == 512 ? 32 : 16, bytes = w / 8;
    for (int i = 0; i < 32; i++)
        for (int j = 0; j < 64; j++)
            in[i][j] = (uint8_t)(i * 67 + j * 13 + 1);
    for (int i = 0; i < 8; i++)
        kin[i] = 0x0123456789abcdefULL * (i + 1);
    if (allow_only_write_and_exit(SECCOMP_RET_KILL_PROCESS) != 0)
        return 77;
    /* Round toward zero, flush to zero, all exceptions masked; x87: double precision, round up. */
    const unsigned mxcsr = 0x1f80 | 0x6000 | 0x8000;
    const unsigned short fcw = 0x0a7f;
    unsigned mxcsr_after;
    unsigned short fcw_after;
    double x87[3] = {0, 0, 2.5};
    long r = traced_write(w, mxcsr, fcw, &mxcsr_after, &fcw_after, x87);
    char line[160];
    int bad = 0, n;
#define SAY(...) (n = snprintf(line, sizeof line, __VA_ARGS__), (void)!write(1, line, n))
    if (r != (long)(sizeof msg - 1))
        bad++, SAY("write returned %ld\n", r);
    for (int i = 0; i < regs; i++)
        if (memcmp(in[i], out[i], bytes) != 0)
            bad++, SAY("vector register %d differs\n", i);
    if (w == 512)
        for (int i = 0; i < 8; i++)
            if (kout[i] != (kin[i] & 0xffffffffffffffffULL))
                bad++, SAY("k%d differs: %#llx\n", i, (unsigned long long)kout[i]);
    if (mxcsr_after != mxcsr)
        bad++, SAY("mxcsr %#x\n", mxcsr_after);
    if (fcw_after != fcw)
        bad++, SAY("x87 control word %#x\n", fcw_after);
    if (x87[0] != 2.5 || x87[1] != 1.0)
        bad++, SAY("x87 registers %g %g\n", x87[0], x87[1]);
    if (!bad)
        SAY("vector state kept (%d registers of %d bits)\n", regs, w);
    syscall(__NR_exit_group, bad ? 1 : 0);
}
