/* auto.c — resolves CONV_AUTO / CONV_AUTO_FAST to a concrete variant for a shape.
 * GPU variants are preferred whenever a device is usable; cpu is the fallback where none is.
 * CONV_AUTO only considers exact variants. */
#include "conv_internal.h"

int conv_auto_resolve(int variant, const conv_params* p, int* chosen) {
    const int want_exact = variant == CONV_AUTO;
    int fallback = -1;
    for (int i = 0; i < CONV_ID_COUNT; ++i) {
        const conv_variant_entry* e = conv_variant_entry_get(i);
        if (!e->impl || (want_exact && !e->info.exact)) continue;
        if (e->info.on_device && !conv_cuda_ready()) continue;
        if (e->impl->supports && e->impl->supports(p) != CONV_OK) continue;
        if (e->info.on_device) { *chosen = i; conv_clear_error(); return CONV_OK; }
        if (fallback < 0) fallback = i;
    }
    conv_clear_error();
    if (fallback < 0)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "no variant supports this shape");
    *chosen = fallback;
    return CONV_OK;
}
