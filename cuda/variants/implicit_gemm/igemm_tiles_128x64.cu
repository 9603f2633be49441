// igemm_tiles_128x64.cu — implicit_gemm's 128 x 64 tile, the one built for every input dtype (three times
// the kernels of the others: igemm_simt_tiles.h).
#include "igemm_simt_tiles.h"

template IGEMM_TILE_RUN(Simt128x64);
