// quantize.c runs llama.cpp's own quantizer (llama_model_quantize from the
// libllama that node-llama-cpp ships) on a GGUF, so `sluice quantize` can be
// compared with it tensor by tensor (cmpgguf.go beside this file).
//
// Build (llama.h and ggml*.h from the llama.cpp source node-llama-cpp
// bundles: git clone ../node_modules/node-llama-cpp/llama/gitRelease.bundle SRC):
//
//   B=../node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
//   cc -O1 -ISRC/include -ISRC/ggml/include quantize.c -o quantize $B/libllama.v*.so -Wl,-rpath,$B
//
// Usage: ./quantize IN.gguf OUT.gguf FTYPE   (15 = Q4_K_M, 18 = Q6_K, …; 1 thread)
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

int main(int argc, char ** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s IN.gguf OUT.gguf FTYPE\n", argv[0]);
        return 2;
    }
    llama_backend_init();
    llama_model_quantize_params p = llama_model_quantize_default_params();
    p.ftype = (enum llama_ftype) atoi(argv[3]);
    p.nthread = 1;
    uint32_t rc = llama_model_quantize(argv[1], argv[2], &p);
    if (rc != 0) {
        fprintf(stderr, "llama_model_quantize: %u\n", rc);
        return 1;
    }
    return 0;
}
