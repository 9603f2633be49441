/* auto.c — resolves CONV_AUTO / CONV_AUTO_FAST to a concrete variant and launch configuration for a
 * problem on the current device: the candidates are the (variant, configuration) pairs that can run
 * it here (GPU ones whenever a device is usable, within the problem's allowed compute); with more
 * than one, the tuner times them once per problem, build and GPU model (in one process while the
 * others wait: tune_cache.c) and the cache remembers the winner. Without a GPU the answer is the cpu
 * variant. */
#include "tune_cache.h"

#define MAX_CANDIDATES 256

/* Every (variant, config) of a GPU variant that can run this problem. */
static int list_candidates(const conv_problem* p, conv_tune_candidate* out) {
    int n = 0;
    for (int i = 0; i < CONV_ID_COUNT; ++i) {
        const conv_variant_entry* e = conv_variant_entry_get(i);
        if (!e->info.on_device || conv_entry_supports(e, p) != CONV_OK) continue;
        for (int c = 0; c < e->impl->num_configs && n < MAX_CANDIDATES; ++c)
            if (conv_entry_config_supports(e, c, p) == CONV_OK) out[n++] = (conv_tune_candidate){i, c};
    }
    conv_clear_error();  /* unsupported candidates are not an error of this call */
    return n;
}

#ifdef CONV_WITH_CUDA
/* The tuning of one problem, as the cache runs it (conv_tuner). */
typedef struct candidate_list {
    const conv_problem* p;
    const conv_tune_candidate* candidates;
    int count;
} candidate_list;

static int measure_candidates(void* context, conv_tune_result* result) {
    const candidate_list* list = context;
    return conv_tune_measure(list->p, list->candidates, list->count, conv_tune_budget_ms(), result);
}

static int is_candidate(void* context, const conv_tune_result* result) {
    const candidate_list* list = context;
    for (int i = 0; i < list->count; ++i)
        if (list->candidates[i].variant == result->best.variant && list->candidates[i].config == result->best.config)
            return 1;
    return 0;
}
#endif

static int host_fallback(const conv_problem* p, int* chosen, int* config) {
    for (int i = 0; i < CONV_ID_COUNT; ++i) {
        const conv_variant_entry* e = conv_variant_entry_get(i);
        if (!e->info.on_device && conv_entry_supports(e, p) == CONV_OK) {
            *chosen = i;
            *config = conv_entry_default_config(e, p);
            return CONV_OK;
        }
    }
    return CONV_ERR_UNSUPPORTED;  /* message from the last supports() */
}

int conv_auto_resolve(int variant, const conv_problem* p, int* chosen, int* config) {
    (void)variant;  /* CONV_AUTO_FAST has already raised p->compute */
    conv_tune_candidate candidates[MAX_CANDIDATES];
    const int n = list_candidates(p, candidates);
    if (n == 0) return host_fallback(p, chosen, config);
    conv_tune_result result = {candidates[0], 0.0f};
#ifdef CONV_WITH_CUDA
    char gpu[256];
    if (n > 1 && conv_gpu_name(gpu, sizeof gpu) == CONV_OK) {
        candidate_list list = {p, candidates, n};
        const conv_tuner tuner = {measure_candidates, is_candidate, &list};
        /* If tuning cannot run (e.g. not enough memory for its buffers), keep the first candidate —
         * correct, only perhaps not the fastest; the cache stores nothing then. */
        if (conv_tune_cache_resolve(gpu, p, &tuner, &result) != CONV_OK) result.best = candidates[0];
    }
#endif
    conv_clear_error();
    *chosen = result.best.variant;
    *config = result.best.config;
    return CONV_OK;
}
