/* plan.h — what a conv_plan holds, and the table of live plan handles that every plan function
 * checks a handle against before it reads the plan. */
#ifndef CONV_PLAN_H
#define CONV_PLAN_H

#include <stdatomic.h>

#include "conv_internal.h"

struct conv_plan {
    conv_problem problem;
    const conv_variant_entry* entry;
    int variant;
    int config;
    int device;            /* -1 for a host variant */
    size_t workspace_bytes;
    /* References: 1 for the table of live handles (until conv2d_plan_destroy) + 1 per call using the
     * plan. The last one frees it, so a destroy while another thread's launch still reads the plan
     * (a finalizer at interpreter exit) frees it only when that launch returns. */
    atomic_int refs;
};

/* Enters a new plan (refs = 1) in the table; CONV_ERR_OUT_OF_MEMORY when the table cannot grow. */
int conv_plan_handle_add(conv_plan* plan);
/* The live plan behind `handle`, with a reference taken for the caller (release it with
 * conv_plan_handle_release); CONV_ERR_INVALID_ARGUMENT naming `function` for NULL, a destroyed plan
 * or a pointer conv2d_plan_create never returned. The handle is looked up, never dereferenced first. */
int conv_plan_handle_acquire(const conv_plan* handle, const char* function, conv_plan** plan);
void conv_plan_handle_release(conv_plan* plan);
/* Removes `handle` from the table and drops the table's reference; an unknown handle as acquire. */
int conv_plan_handle_remove(conv_plan* handle);

#endif
