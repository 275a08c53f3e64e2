// How far ahead (bytes) the decode kernels that read a weight's own
// row-major blocks hint each stream into the caches: RFAR into L2 for the
// Q8_0 and Q4_0 row kernels (beside their L1 hint 512 bytes ahead), R4D
// and Q6D into L1 for the four-row Q4_K and Q6_K kernels (every line of a
// block each). The mmap tier reads the file's own 4 KiB pages, where the
// hardware's L2 streamer stops at every page edge: with two or four streams
// a thread, 512 bytes ahead (or none) was too short to hide DRAM's latency
// at each new page. 7B, mmap, 1 thread, decode tok/s (alternating pairs on
// an AVX-512/AMX Xeon): Q8_0 1.32-1.40 -> 1.60-1.64 (native and avx2),
// Q4_0 avx2 2.56 -> 2.99-3.03, Q4_K_M 2.67-2.78 -> 3.17-3.23; twice these
// distances measured the same, half of them 2-7% slower.
#define RFAR 2048
#define R4D 1152
#define Q6D 1680
