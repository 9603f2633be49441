// igemm_tiles_wide.cu — implicit_gemm's 128 x 128 and 64 x 128 tiles (igemm_simt_tiles.h says why they are
// apart).
#include "igemm_simt_tiles.h"

template IGEMM_TILE_RUN(Simt128x128);
template IGEMM_TILE_RUN(Simt64x128);
