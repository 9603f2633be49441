// igemm_tiles_thin.cu — implicit_gemm's 32-map tiles (igemm_simt_tiles.h says why they are apart).
#include "igemm_simt_tiles.h"

template IGEMM_TILE_RUN(Simt32x256);
template IGEMM_TILE_RUN(Simt32x128);
