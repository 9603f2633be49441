/* plan_handles.c — the table of live plan handles. A C caller can pass any pointer as a conv_plan*:
 * one destroyed already, one never made by conv2d_plan_create. Reading through it is undefined (a
 * double destroy aborted in glibc, a stale launch segfaulted or returned CONV_OK), so every plan
 * function first finds the handle in this table, by its address only, and takes a reference.
 *
 * An open-addressing hash set of pointers (linear probing, deletion by shifting back, no tombstones)
 * under a read-write lock: launches from many threads only read it. */
#define _POSIX_C_SOURCE 200809L  /* pthread_rwlock_t under -std=c11 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "plan.h"

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static conv_plan** slots;   /* capacity entries, NULL = empty */
static size_t capacity;     /* a power of two, or 0 before the first plan */
static size_t live;

static size_t slot_of(const void* p, size_t cap) {
    const uint64_t h = ((uint64_t)(uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (cap - 1);
}

/* The slot holding p, or capacity when it is not in the table. Call with the lock held. */
static size_t find(const void* p) {
    if (!capacity) return 0;
    for (size_t i = slot_of(p, capacity);; i = (i + 1) & (capacity - 1)) {
        if (slots[i] == p) return i;
        if (!slots[i]) return capacity;
    }
}

static void insert(conv_plan** table, size_t cap, conv_plan* p) {
    size_t i = slot_of(p, cap);
    while (table[i]) i = (i + 1) & (cap - 1);
    table[i] = p;
}

int conv_plan_handle_add(conv_plan* plan) {
    atomic_init(&plan->refs, 1);
    pthread_rwlock_wrlock(&lock);
    if (2 * (live + 1) > capacity) {  /* at most half full: probes stay short */
        const size_t cap = capacity ? 2 * capacity : 64;
        conv_plan** table = (conv_plan**)calloc(cap, sizeof *table);
        if (!table) {
            pthread_rwlock_unlock(&lock);
            return conv_set_error(CONV_ERR_OUT_OF_MEMORY, "out of host memory for the table of plans (%zu bytes)",
                                  cap * sizeof *table);
        }
        for (size_t i = 0; i < capacity; i++)
            if (slots[i]) insert(table, cap, slots[i]);
        free(slots);
        slots = table;
        capacity = cap;
    }
    insert(slots, capacity, plan);
    live++;
    pthread_rwlock_unlock(&lock);
    return CONV_OK;
}

static int unknown(const conv_plan* handle, const char* function) {
    if (!handle) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "%s: plan is NULL", function);
    return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                          "%s: plan %p is not a live plan (destroyed already, or not made by conv2d_plan_create)",
                          function, (const void*)handle);
}

int conv_plan_handle_acquire(const conv_plan* handle, const char* function, conv_plan** plan) {
    *plan = NULL;
    pthread_rwlock_rdlock(&lock);
    const size_t i = handle ? find(handle) : capacity;
    if (i < capacity) {
        *plan = slots[i];
        /* In the table, so the table's reference keeps refs >= 1 while we add ours. */
        atomic_fetch_add_explicit(&(*plan)->refs, 1, memory_order_relaxed);
    }
    pthread_rwlock_unlock(&lock);
    return *plan ? CONV_OK : unknown(handle, function);
}

void conv_plan_handle_release(conv_plan* plan) {
    if (atomic_fetch_sub_explicit(&plan->refs, 1, memory_order_acq_rel) == 1) free(plan);
}

int conv_plan_handle_remove(conv_plan* handle) {
    pthread_rwlock_wrlock(&lock);
    size_t i = handle ? find(handle) : capacity;
    if (i >= capacity) {
        pthread_rwlock_unlock(&lock);
        return unknown(handle, "conv2d_plan_destroy");
    }
    /* Shift back the entries after i that probed past it, so every lookup still meets them before an
     * empty slot. */
    slots[i] = NULL;
    for (size_t j = (i + 1) & (capacity - 1); slots[j]; j = (j + 1) & (capacity - 1)) {
        const size_t home = slot_of(slots[j], capacity);
        /* slots[j] may move to i when its home is not in the cyclic range (i, j]. */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            slots[i] = slots[j];
            slots[j] = NULL;
            i = j;
        }
    }
    live--;
    pthread_rwlock_unlock(&lock);
    conv_plan_handle_release(handle);
    return CONV_OK;
}
