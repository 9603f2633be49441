/* tune_cache.c — the tuning results: in memory, and in a text file so that a shape is tuned once per
 * machine. One line per result:
 *   <gpu>|<library version>|<B,C,H,W,M,KH,KW,sh,sw,ph,pw,dh,dw>|<exact|fast>\t<variant>\t<config>\t<ms>
 * Variants and configs are stored by name, so a rebuilt library with another table order still reads
 * the file; lines naming what no longer exists are ignored. Plain C: the file lives in both builds. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "conv_internal.h"

#define KEY_BYTES 512

typedef struct entry {
    char key[KEY_BYTES];
    conv_tune_result result;
} entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry* entries;
static int count, capacity, loaded;
static char path[4096];
static double budget_ms = 3000.0;

static void make_key(char* key, const char* gpu, const conv_params* p, int exact) {
    snprintf(key, KEY_BYTES, "%s|%s|%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld|%s",
             gpu, conv_version(), (long long)p->B, (long long)p->C, (long long)p->H, (long long)p->W,
             (long long)p->M, (long long)p->KH, (long long)p->KW, (long long)p->stride_h,
             (long long)p->stride_w, (long long)p->pad_h, (long long)p->pad_w, (long long)p->dilation_h,
             (long long)p->dilation_w, exact ? "exact" : "fast");
}

static const char* config_name(int variant, int config) {
    const conv_variant_entry* e = conv_variant_entry_get(variant);
    return config >= 0 && e->impl && e->impl->config_name ? e->impl->config_name(config) : "default";
}

/* The config index of a name, -1 for "default", -2 when the variant has no such config. */
static int find_config(int variant, const char* name) {
    if (strcmp(name, "default") == 0) return -1;
    const conv_variant_entry* e = conv_variant_entry_get(variant);
    if (!e->impl || !e->impl->config_name) return -2;
    for (int c = 0; c < e->impl->num_configs; ++c)
        if (strcmp(e->impl->config_name(c), name) == 0) return c;
    return -2;
}

static void remember(const char* key, const conv_tune_result* result) {
    for (int i = 0; i < count; ++i)
        if (strcmp(entries[i].key, key) == 0) { entries[i].result = *result; return; }
    if (count == capacity) {
        int grown = capacity ? 2 * capacity : 64;
        entry* bigger = realloc(entries, (size_t)grown * sizeof *bigger);
        if (!bigger) return;  /* out of host memory: the result is just not remembered */
        entries = bigger;
        capacity = grown;
    }
    snprintf(entries[count].key, KEY_BYTES, "%s", key);
    entries[count++].result = *result;
}

static const char* cache_path(void) {
    if (path[0]) return path;
    const char* env = getenv("PYCONV_TUNE_CACHE");
    if (env && env[0]) {
        snprintf(path, sizeof path, "%s", env);
    } else {
        const char* xdg = getenv("XDG_CACHE_HOME");
        const char* home = getenv("HOME");
        if (xdg && xdg[0]) snprintf(path, sizeof path, "%s/pyconv/tuning.txt", xdg);
        else snprintf(path, sizeof path, "%s/.cache/pyconv/tuning.txt", home && home[0] ? home : "/tmp");
    }
    return path;
}

static void load_file(void) {
    loaded = 1;
    FILE* f = fopen(cache_path(), "r");
    if (!f) return;
    char line[KEY_BYTES + 256];
    while (fgets(line, sizeof line, f)) {
        char key[KEY_BYTES], variant_name[128], config[128];
        float ms;
        if (sscanf(line, "%511[^\t]\t%127[^\t]\t%127[^\t]\t%f", key, variant_name, config, &ms) != 4) continue;
        int variant;
        if (conv_variant_find(variant_name, &variant) != CONV_OK || variant < 0) continue;
        int c = find_config(variant, config);
        if (c == -2) continue;
        conv_tune_result r = {{variant, c}, ms};
        remember(key, &r);
    }
    fclose(f);
    conv_clear_error();
}

/* mkdir -p of the file's directory; failures show up when the file is opened. */
static void make_parent_dirs(const char* file) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", file);
    for (char* s = dir + 1; *s; ++s) {
        if (*s != '/') continue;
        *s = '\0';
        mkdir(dir, 0755);
        *s = '/';
    }
}

int conv_tune_cache_get(const char* gpu, const conv_params* p, int exact, conv_tune_result* result) {
    char key[KEY_BYTES];
    make_key(key, gpu, p, exact);
    int status = CONV_ERR_UNSUPPORTED;
    pthread_mutex_lock(&lock);
    if (!loaded) load_file();
    for (int i = count - 1; i >= 0; --i)
        if (strcmp(entries[i].key, key) == 0) { *result = entries[i].result; status = CONV_OK; break; }
    pthread_mutex_unlock(&lock);
    return status;
}

void conv_tune_cache_put(const char* gpu, const conv_params* p, int exact, const conv_tune_result* result) {
    char key[KEY_BYTES];
    make_key(key, gpu, p, exact);
    pthread_mutex_lock(&lock);
    remember(key, result);
    make_parent_dirs(cache_path());
    FILE* f = fopen(cache_path(), "a");  /* a read-only cache location only costs re-tuning */
    if (f) {
        const conv_variant_entry* e = conv_variant_entry_get(result->best.variant);
        fprintf(f, "%s\t%s\t%s\t%.6f\n", key, e->info.name,
                config_name(result->best.variant, result->best.config), result->median_ms);
        fclose(f);
    }
    pthread_mutex_unlock(&lock);
}

double conv_tune_budget_ms(void) { return budget_ms; }

int conv_tune_set_budget_ms(double ms) {
    if (!(ms >= 0.0)) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "budget must be >= 0 ms, got %g", ms);
    budget_ms = ms;
    return CONV_OK;
}

int conv_tune_set_cache_path(const char* new_path) {
    pthread_mutex_lock(&lock);
    snprintf(path, sizeof path, "%s", new_path ? new_path : "");
    count = 0;
    loaded = 0;  /* read the new file on next use */
    pthread_mutex_unlock(&lock);
    return CONV_OK;
}

int conv_tune_get_cache_path(char* out, size_t out_bytes) {
    if (!out) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "path is NULL");
    pthread_mutex_lock(&lock);
    snprintf(out, out_bytes, "%s", cache_path());
    pthread_mutex_unlock(&lock);
    return CONV_OK;
}

int conv_tune_clear(void) {
    int status = CONV_OK;
    pthread_mutex_lock(&lock);
    count = 0;
    loaded = 1;
    if (remove(cache_path()) != 0 && errno != ENOENT)
        status = conv_set_error(CONV_ERR_INVALID_ARGUMENT, "cannot remove the tuning cache %s: %s",
                                cache_path(), strerror(errno));
    pthread_mutex_unlock(&lock);
    return status;
}

int conv_tune_describe(int variant, const conv_params* p, char* text, size_t text_bytes) {
    if (!text) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "text is NULL");
    int status = conv_validate(p);
    if (status != CONV_OK) return status;
    int chosen, config;
    if (variant == CONV_AUTO || variant == CONV_AUTO_FAST) {
        status = conv_auto_resolve(variant, p, &chosen, &config);
        if (status != CONV_OK) return status;
    } else {
        if (!conv_variant_entry_get(variant))
            return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "variant id %d is out of range", variant);
        chosen = variant;
        config = -1;
    }
    float ms = 0.0f;
#ifdef CONV_WITH_CUDA
    char gpu[256];
    conv_tune_result r;
    if (conv_gpu_name(gpu, sizeof gpu) == CONV_OK &&
        conv_tune_cache_get(gpu, p, variant == CONV_AUTO, &r) == CONV_OK && r.best.variant == chosen &&
        r.best.config == config)
        ms = r.median_ms;
    conv_clear_error();
#endif
    const conv_variant_entry* e = conv_variant_entry_get(chosen);
    if (ms > 0.0f)
        snprintf(text, text_bytes, "%s[%s] %.4f ms (tuned)", e->info.name, config_name(chosen, config), ms);
    else
        snprintf(text, text_bytes, "%s[%s] (not timed)", e->info.name, config_name(chosen, config));
    return CONV_OK;
}
