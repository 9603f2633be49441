/* auto.c — resolves CONV_AUTO / CONV_AUTO_FAST to a concrete variant (and launch configuration)
 * for a shape: the candidates are the variants that can run it here (GPU ones whenever a device is
 * usable; only exact ones for CONV_AUTO); with more than one, the tuner times them once per shape
 * and the cache remembers the winner. Without a GPU the answer is the cpu variant. */
#include "conv_internal.h"

#define MAX_CANDIDATES 256

/* Every (variant, config) that can run this shape, GPU variants only. */
static int list_candidates(const conv_params* p, int want_exact, conv_tune_candidate* out) {
    int n = 0;
    for (int i = 0; i < CONV_ID_COUNT; ++i) {
        const conv_variant_entry* e = conv_variant_entry_get(i);
        if (!e->info.on_device || (want_exact && !e->info.exact)) continue;
        if (conv_entry_supports(e, p) != CONV_OK) continue;
        if (e->impl->num_configs == 0) {
            if (n < MAX_CANDIDATES) out[n++] = (conv_tune_candidate){i, -1};
            continue;
        }
        for (int c = 0; c < e->impl->num_configs && n < MAX_CANDIDATES; ++c)
            if (!e->impl->config_supports || e->impl->config_supports(p, c) == CONV_OK)
                out[n++] = (conv_tune_candidate){i, c};
    }
    conv_clear_error();  /* unsupported candidates are not an error of this call */
    return n;
}

#ifdef CONV_WITH_CUDA
static int contains(const conv_tune_candidate* list, int n, conv_tune_candidate c) {
    for (int i = 0; i < n; ++i)
        if (list[i].variant == c.variant && list[i].config == c.config) return 1;
    return 0;
}
#endif

static int host_fallback(int* chosen, int* config) {
    for (int i = 0; i < CONV_ID_COUNT; ++i) {
        const conv_variant_entry* e = conv_variant_entry_get(i);
        if (!e->info.on_device && e->impl) {
            *chosen = i;
            *config = -1;
            return CONV_OK;
        }
    }
    return conv_set_error(CONV_ERR_UNSUPPORTED, "no variant can run this shape here");
}

int conv_auto_resolve(int variant, const conv_params* p, int* chosen, int* config) {
    const int want_exact = variant == CONV_AUTO;
    conv_tune_candidate candidates[MAX_CANDIDATES];
    const int n = list_candidates(p, want_exact, candidates);
    if (n == 0) return host_fallback(chosen, config);
    conv_tune_result result = {candidates[0], 0.0f};
#ifdef CONV_WITH_CUDA
    char gpu[256];
    if (n > 1 && conv_gpu_name(gpu, sizeof gpu) == CONV_OK) {
        int cached = conv_tune_cache_get(gpu, p, want_exact, &result) == CONV_OK &&
                     contains(candidates, n, result.best);
        /* New shape: tune it. If tuning itself cannot run (e.g. not enough memory for its buffers),
         * keep the first candidate — correct, only perhaps not the fastest — and do not cache it. */
        if (!cached) {
            if (conv_tune_measure(p, candidates, n, conv_tune_budget_ms(), &result) == CONV_OK)
                conv_tune_cache_put(gpu, p, want_exact, &result);
            else
                result.best = candidates[0];
        }
    }
#endif
    conv_clear_error();
    *chosen = result.best.variant;
    *config = result.best.config;
    return CONV_OK;
}
