/* ceilings_stub.c — conv_measure_ceilings in a build without CUDA: there is no GPU to measure.
 * CMake compiles every .c file of cuda/ into every build, so the body is kept out of the CUDA build, where
 * ceilings.cu defines the function. */
#ifndef CONV_WITH_CUDA
#include "conv_internal.h"

int conv_measure_ceilings(conv_ceilings* out) {
    (void)out;
    return conv_set_error(CONV_ERR_NO_CUDA_BUILD,
                          "conv_measure_ceilings measures a GPU, but libconv was built without a CUDA "
                          "compiler (install the CUDA toolkit and rebuild)");
}
#endif
