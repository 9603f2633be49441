// igemm_tiles_quad.cu — implicit_gemm's 4 x 4-per-thread tiles for small GEMMs (igemm_simt_tiles.h).
#include "igemm_simt_tiles.h"

template IGEMM_TILE_RUN(Quad64x64);
template IGEMM_TILE_RUN(Quad64x32);
template IGEMM_TILE_RUN(Quad32x64);
