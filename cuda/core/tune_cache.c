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

/* The key: GPU, library version and the whole problem (conv_problem_describe). */
static void make_key(char* key, const char* gpu, const conv_problem* p) {
    char problem[384];
    if (conv_problem_describe(p, problem, sizeof problem) != CONV_OK) problem[0] = '\0';
    snprintf(key, KEY_BYTES, "%s|%s|%s", gpu, conv_version(), problem);
}

static const char* config_name(int variant, int config) {
    const conv_variant_entry* e = conv_variant_entry_get(variant);
    return config >= 0 && e->impl && config < e->impl->num_configs ? e->impl->configs[config].name : "default";
}

/* The config index of a name, -2 when the variant has no such config. */
static int find_config(int variant, const char* name) {
    const conv_variant_entry* e = conv_variant_entry_get(variant);
    int config = -2;
    if (e->impl && conv_entry_config_find(e, name, &config) != CONV_OK) config = -2;
    return config;
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

int conv_tune_cache_get(const char* gpu, const conv_problem* p, conv_tune_result* result) {
    char key[KEY_BYTES];
    make_key(key, gpu, p);
    int status = CONV_ERR_UNSUPPORTED;
    pthread_mutex_lock(&lock);
    if (!loaded) load_file();
    for (int i = count - 1; i >= 0; --i)
        if (strcmp(entries[i].key, key) == 0) { *result = entries[i].result; status = CONV_OK; break; }
    pthread_mutex_unlock(&lock);
    return status;
}

void conv_tune_cache_put(const char* gpu, const conv_problem* p, const conv_tune_result* result) {
    char key[KEY_BYTES];
    make_key(key, gpu, p);
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

int conv_tune_describe_problem(int variant, const conv_problem* p, char* text, size_t text_bytes) {
    if (!text) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "text is NULL");
    conv_plan* plan = NULL;
    int status = conv2d_plan_create(variant, p, NULL, -1, &plan);
    if (status != CONV_OK) return status;
    conv_plan_info info;
    conv2d_plan_get_info(plan, &info);
    conv2d_plan_destroy(plan);
    float ms = 0.0f;
#ifdef CONV_WITH_CUDA
    char gpu[256];
    conv_tune_result r;
    conv_problem full;
    if (conv_problem_load(p, &full) == CONV_OK && (variant == CONV_AUTO || variant == CONV_AUTO_FAST)) {
        if (variant == CONV_AUTO_FAST && full.compute < CONV_COMPUTE_HALF) full.compute = CONV_COMPUTE_HALF;
        if (info.on_device && conv_gpu_name(gpu, sizeof gpu) == CONV_OK &&
            conv_tune_cache_get(gpu, &full, &r) == CONV_OK && r.best.variant == info.variant &&
            strcmp(config_name(r.best.variant, r.best.config), info.config_name) == 0)
            ms = r.median_ms;
    }
    conv_clear_error();
#endif
    if (ms > 0.0f)
        snprintf(text, text_bytes, "%s[%s] %.4f ms (tuned)", info.variant_name, info.config_name, ms);
    else
        snprintf(text, text_bytes, "%s[%s] (not timed)", info.variant_name, info.config_name);
    return CONV_OK;
}

int conv_tune_describe(int variant, const conv_params* params, char* text, size_t text_bytes) {
    if (!params) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "params is NULL");
    conv_problem p;
    conv_problem_from_params(params, variant, &p);
    return conv_tune_describe_problem(variant, &p, text, text_bytes);
}
