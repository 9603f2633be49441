/* tune_cache.h — how auto gets a tuned result from the cache shared by every process on the machine
 * (tune_cache.c): one process or thread tunes a problem, the others wait for its result. */
#ifndef CONV_TUNE_CACHE_H
#define CONV_TUNE_CACHE_H

#include "conv_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How one problem is tuned: measure() times the candidates and gives the winner; accepts() says
 * whether a cached winner is still one of them (one that is not is tuned again). */
typedef struct conv_tuner {
    int (*measure)(void* context, conv_tune_result* result);
    int (*accepts)(void* context, const conv_tune_result* result);
    void* context;
} conv_tuner;

/* The cached result for (gpu, problem); on a miss, the file is read again (another process may
 * have tuned it meanwhile), then the problem's lock is taken (waiting while another process or
 * thread tunes it), the file read once more, and only if the result is still missing measure() runs
 * and its result is stored. A failed measure() stores nothing and returns its status. */
int conv_tune_cache_resolve(const char* gpu, const conv_problem* p, const conv_tuner* tuner,
                            conv_tune_result* result);

#ifdef __cplusplus
}
#endif

#endif
