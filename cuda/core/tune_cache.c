/* tune_cache.c — the tuning results: in memory, and in a text file shared by the processes of a
 * machine, so that a problem is tuned once per GPU model and build. The file:
 *   # pyconv tuning cache v2
 *   <gpu>|<build id>|cuda <driver>/<runtime>|<problem>\t<variant>\t<config>\t<ms>
 * one line appended per tuning; a later line for a key replaces an earlier one. The build id
 * (cmake/build_id.cmake) hashes the variant and configuration tables and every kernel source, so a
 * rebuilt library never reuses another build's winners; variants and configurations are stored by
 * name. A file without this header, or with another version, is ignored and replaced on the next
 * store; conv_tune_compact keeps the newest line per key of this build. The cache knows problems and
 * variants, never plans: its caller (auto.c) passes the problem; what auto chose for a shape with its
 * cached time (conv_tune_describe) is dispatch.c's.
 *
 * Processes coordinate through open-file-description locks on <file>.lock, which the kernel drops
 * when their descriptor closes or their process dies, so a crashed tuner leaves no lock behind.
 * Byte 0 guards the cache file (shared to read it, exclusive to append to or replace it); the byte at
 * a hash of a key is held while that key is tuned, so that the others wait for the result instead of
 * timing against the tuner on the same GPU. Every lock is taken through a descriptor of its own,
 * which makes the threads of one process wait for each other the same way. table_mutex guards the
 * in-memory table and the path, and is never held while tuning, which takes seconds. */
#define _GNU_SOURCE /* F_OFD_SETLKW, st_mtim */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conv_build_id.h"
#include "tune_cache.h"

#define KEY_BYTES 512
#define PATH_BYTES 4096
#define LOCK_PATH_BYTES (PATH_BYTES + 8)
#define LINE_BYTES (KEY_BYTES + 512)

static const char HEADER[] = "# pyconv tuning cache v2\n";
static const off_t FILE_LOCK_BYTE = 0;

typedef struct entry {
    char key[KEY_BYTES];
    conv_tune_result result;
} entry;

typedef struct table {
    entry* entries;
    int count, capacity;
} table;

/* Which version of the file was read last, so that a miss reads it again only once it changed. */
typedef struct file_stamp {
    int valid;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} file_stamp;

static pthread_mutex_t table_mutex = PTHREAD_MUTEX_INITIALIZER;
static table memory;
static file_stamp memory_stamp;
static char path[PATH_BYTES];
static double budget_ms = 3000.0;
/* A thread's own budget (pyconv.torch tunes its layers with a shorter one than a direct call's), < 0: none. */
static _Thread_local double thread_budget_ms = -1.0;

/* The key: GPU, build, CUDA versions and the whole problem (conv_problem_describe). */
static void make_key(char* key, const char* gpu, const conv_problem* p) {
    char problem[384];
    int driver = 0, runtime = 0;
    if (conv_problem_describe(p, problem, sizeof problem) != CONV_OK) problem[0] = '\0';
    if (conv_cuda_versions(&driver, &runtime) != CONV_OK) driver = runtime = 0;
    snprintf(key, KEY_BYTES, "%s|%s|cuda %d/%d|%s", gpu, CONV_BUILD_ID, driver, runtime, problem);
}

/* Whether this build wrote a key: its second field is this build's id. */
static int of_this_build(const char* key) {
    const char* build = strchr(key, '|');
    const size_t n = strlen(CONV_BUILD_ID);
    return build && strncmp(build + 1, CONV_BUILD_ID, n) == 0 && build[1 + n] == '|';
}

/* The lock-file byte held while a key is tuned: 1 + a 30-bit FNV-1a hash of the key (two keys that
 * share a byte only wait for each other). */
static off_t key_lock_byte(const char* key) {
    uint64_t hash = 14695981039346656037ull;
    for (const unsigned char* c = (const unsigned char*)key; *c; ++c) hash = (hash ^ *c) * 1099511628211ull;
    return 1 + (off_t)(hash >> 34);
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

static const entry* table_find(const table* t, const char* key) {
    for (int i = 0; i < t->count; ++i)
        if (strcmp(t->entries[i].key, key) == 0) return &t->entries[i];
    return NULL;
}

static void table_put(table* t, const char* key, const conv_tune_result* result) {
    for (int i = 0; i < t->count; ++i)
        if (strcmp(t->entries[i].key, key) == 0) { t->entries[i].result = *result; return; }
    if (t->count == t->capacity) {
        int grown = t->capacity ? 2 * t->capacity : 64;
        entry* bigger = realloc(t->entries, (size_t)grown * sizeof *bigger);
        if (!bigger) return;  /* out of host memory: the result is just not remembered */
        t->entries = bigger;
        t->capacity = grown;
    }
    snprintf(t->entries[t->count].key, KEY_BYTES, "%s", key);
    t->entries[t->count++].result = *result;
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

/* mkdir -p of the file's directory; failures show up when the file is opened. */
static void make_parent_dirs(const char* file) {
    char dir[PATH_BYTES];
    snprintf(dir, sizeof dir, "%s", file);
    for (char* s = dir + 1; *s; ++s) {
        if (*s != '/') continue;
        *s = '\0';
        mkdir(dir, 0755);
        *s = '/';
    }
}

/* Takes a lock of `type` (F_RDLCK or F_WRLCK) on one byte of the cache's lock file, waiting for
 * it, through a descriptor of its own: closing that releases the lock. -1 where the lock file cannot
 * be opened or locked (a read-only cache location, where there is nothing to share). */
static int take_lock(const char* file, short type, off_t byte) {
    char lock_file[LOCK_PATH_BYTES];
    snprintf(lock_file, sizeof lock_file, "%s.lock", file);
    int fd = open(lock_file, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return -1;
    struct flock range = {.l_type = type, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1};
    while (fcntl(fd, F_OFD_SETLKW, &range) != 0) {
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

static void release_lock(int fd) {
    if (fd >= 0) close(fd);
}

/* One line of the file as an entry: 0 for a line that is malformed, of another build, or names a
 * variant or configuration this build lacks. */
static int parse_line(const char* line, entry* out) {
    char variant_name[128], config[128];
    float ms;
    if (sscanf(line, "%511[^\t]\t%127[^\t]\t%127[^\t]\t%f", out->key, variant_name, config, &ms) != 4 ||
        !of_this_build(out->key))
        return 0;
    int variant;
    if (conv_variant_find(variant_name, &variant) != CONV_OK || variant < 0) return 0;
    const int c = find_config(variant, config);
    if (c == -2) return 0;
    out->result = (conv_tune_result){{variant, c}, ms};
    return 1;
}

static void write_line(FILE* f, const entry* e) {
    const conv_tune_result* r = &e->result;
    fprintf(f, "%s\t%s\t%s\t%.6f\n", e->key, conv_variant_entry_get(r->best.variant)->info.name,
            config_name(r->best.variant, r->best.config), r->median_ms);
}

/* Reads a cache file's entries into a table (a later line for a key replaces an earlier one) and
 * returns how many lines it has besides the header. A file without this version's header is ignored:
 * its lines are counted, none is read. The caller holds the file lock. */
static int read_entries(FILE* f, table* into) {
    char line[LINE_BYTES];
    const int versioned = fgets(line, sizeof line, f) && strcmp(line, HEADER) == 0;
    if (!versioned) rewind(f);
    int lines = 0;
    entry e;
    while (fgets(line, sizeof line, f)) {
        ++lines;
        if (versioned && parse_line(line, &e)) table_put(into, e.key, &e.result);
    }
    conv_clear_error();  /* lines naming what this build lacks are no error of the caller */
    return lines;
}

static int file_is_versioned(const char* file) {
    FILE* f = fopen(file, "r");
    if (!f) return 0;
    char line[sizeof HEADER];
    const int versioned = fgets(line, sizeof line, f) && strcmp(line, HEADER) == 0;
    fclose(f);
    return versioned;
}

/* Writes the header and the entries to a temporary file and renames it over `file`, so that no
 * reader ever sees half of it. The caller holds the exclusive file lock. */
static int replace_file(const char* file, const entry* entries, int count) {
    char temp[PATH_BYTES + 32];
    snprintf(temp, sizeof temp, "%s.tmp.%ld", file, (long)getpid());
    FILE* f = fopen(temp, "w");
    if (!f) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "cannot write %s: %s", temp, strerror(errno));
    fputs(HEADER, f);
    for (int i = 0; i < count; ++i) write_line(f, &entries[i]);
    int failed = ferror(f);
    failed |= fclose(f) != 0;
    if (failed || rename(temp, file) != 0) {
        const int error = errno;
        remove(temp);
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "cannot replace the tuning cache %s: %s", file,
                              strerror(error));
    }
    return CONV_OK;
}

/* Removes the temporaries of replace_file (<file>.tmp.<pid>) that a writer killed mid-write left
 * behind: a library cannot catch the kill (signal handlers are the application's), so the next writer
 * sweeps. Only names of exactly that form go, and only where no process <pid> lives (kill(pid, 0)
 * fails with ESRCH). The caller holds the exclusive file lock, so no writer sharing it is at work;
 * the pid check covers writers that could not take the lock. */
static void remove_stale_temps(const char* file) {
    char dir[PATH_BYTES], prefix[PATH_BYTES + 8];
    snprintf(dir, sizeof dir, "%s", file);
    char* slash = strrchr(dir, '/');
    snprintf(prefix, sizeof prefix, "%s.tmp.", slash ? slash + 1 : dir);
    if (slash) slash[slash == dir] = '\0';  /* "/a/b" -> "/a", "/b" -> "/" */
    DIR* d = opendir(slash ? dir : ".");
    if (!d) return;
    const size_t n = strlen(prefix);
    for (struct dirent* e; (e = readdir(d));) {
        const char* digits = e->d_name + n;
        if (strncmp(e->d_name, prefix, n) != 0 || !*digits || digits[strspn(digits, "0123456789")]) continue;
        errno = 0;
        const long pid = strtol(digits, NULL, 10);
        if (errno || pid <= 0 || pid != (pid_t)pid || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

/* Appends an entry to the file, or replaces a file without this version's header by one with the
 * header and the entry. Failures are silent: a read-only cache location only costs re-tuning. The
 * caller holds the mutex. */
static void store(const entry* e) {
    make_parent_dirs(cache_path());
    const int held = take_lock(cache_path(), F_WRLCK, FILE_LOCK_BYTE);
    remove_stale_temps(cache_path());
    if (file_is_versioned(cache_path())) {
        FILE* f = fopen(cache_path(), "a");
        if (f) {
            write_line(f, e);
            fclose(f);
        }
    } else {
        replace_file(cache_path(), e, 1);
        conv_clear_error();
    }
    release_lock(held);
}

static file_stamp stamp_of(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return (file_stamp){0};
    return (file_stamp){1, st.st_dev, st.st_ino, st.st_size, st.st_mtim};
}

static int same_stamp(const file_stamp* a, const file_stamp* b) {
    return a->valid && b->valid && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Reads the file into memory if it changed since it was last read: another process may have tuned
 * a problem meanwhile. The caller holds the mutex. */
static void refresh_memory(void) {
    FILE* f = fopen(cache_path(), "r");
    if (!f) return;
    const int held = take_lock(cache_path(), F_RDLCK, FILE_LOCK_BYTE);  /* no append under way */
    const file_stamp now = stamp_of(fileno(f));
    if (!same_stamp(&now, &memory_stamp)) {
        read_entries(f, &memory);
        memory_stamp = now;
    }
    release_lock(held);
    fclose(f);
}

/* The result for a key, from memory, else from the file if it changed: 1 if there is one. */
static int lookup(const char* key, conv_tune_result* result) {
    pthread_mutex_lock(&table_mutex);
    const entry* e = table_find(&memory, key);
    if (!e) {
        refresh_memory();
        e = table_find(&memory, key);
    }
    if (e) *result = e->result;
    pthread_mutex_unlock(&table_mutex);
    return e != NULL;
}

static void remember(const char* key, const conv_tune_result* result) {
    entry e;
    snprintf(e.key, KEY_BYTES, "%s", key);
    e.result = *result;
    pthread_mutex_lock(&table_mutex);
    table_put(&memory, e.key, result);
    store(&e);
    pthread_mutex_unlock(&table_mutex);
}

int conv_tune_cache_get(const char* gpu, const conv_problem* p, conv_tune_result* result) {
    char key[KEY_BYTES];
    make_key(key, gpu, p);
    return lookup(key, result) ? CONV_OK : CONV_ERR_UNSUPPORTED;
}

static int lookup_accepted(const char* key, const conv_tuner* tuner, conv_tune_result* result) {
    return lookup(key, result) && tuner->accepts(tuner->context, result);
}

int conv_tune_cache_resolve(const char* gpu, const conv_problem* p, const conv_tuner* tuner,
                            conv_tune_result* result) {
    char key[KEY_BYTES], file[PATH_BYTES];
    make_key(key, gpu, p);
    if (lookup_accepted(key, tuner, result)) return CONV_OK;
    pthread_mutex_lock(&table_mutex);
    make_parent_dirs(cache_path());
    snprintf(file, sizeof file, "%s", cache_path());
    pthread_mutex_unlock(&table_mutex);
    /* Whoever holds the key's lock is tuning it: its result is in the file once we have the lock. */
    const int held = take_lock(file, F_WRLCK, key_lock_byte(key));
    int status = CONV_OK;
    if (!lookup_accepted(key, tuner, result)) {
        status = tuner->measure(tuner->context, result);
        if (status == CONV_OK) {
            /* The time as the file holds it (6 decimals), so that this process reports what the next one
             * reads (0.02445 could print 0.0244 here and 0.0245 there) */
            char text[32];
            snprintf(text, sizeof text, "%.6f", result->median_ms);
            result->median_ms = strtof(text, NULL);
            remember(key, result);
        }
    }
    release_lock(held);
    return status;
}

int conv_tune_compact(int* lines_kept, int* lines_dropped) {
    table kept = {0};
    int lines = 0, status = CONV_OK;
    pthread_mutex_lock(&table_mutex);
    const int held = take_lock(cache_path(), F_WRLCK, FILE_LOCK_BYTE);
    remove_stale_temps(cache_path());
    FILE* f = fopen(cache_path(), "r");
    if (f) {
        lines = read_entries(f, &kept);
        fclose(f);
        status = replace_file(cache_path(), kept.entries, kept.count);
    } else if (errno != ENOENT) {
        status = conv_set_error(CONV_ERR_INVALID_ARGUMENT, "cannot read the tuning cache %s: %s", cache_path(),
                                strerror(errno));
    }
    release_lock(held);
    pthread_mutex_unlock(&table_mutex);
    if (lines_kept) *lines_kept = status == CONV_OK ? kept.count : 0;
    if (lines_dropped) *lines_dropped = status == CONV_OK ? lines - kept.count : 0;
    free(kept.entries);
    return status;
}

double conv_tune_budget_ms(void) { return thread_budget_ms >= 0.0 ? thread_budget_ms : budget_ms; }

int conv_tune_set_thread_budget_ms(double ms) {
    if (isnan(ms) || isinf(ms))
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "thread budget must be a finite number of ms, got %g", ms);
    thread_budget_ms = ms < 0.0 ? -1.0 : ms;
    return CONV_OK;
}

int conv_tune_get_thread_budget_ms(double* ms) {
    if (!ms) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "ms is NULL");
    *ms = thread_budget_ms;
    return CONV_OK;
}

int conv_tune_set_budget_ms(double ms) {
    if (!(ms >= 0.0) || isinf(ms))
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "budget must be a finite number of ms >= 0, got %g", ms);
    budget_ms = ms;
    return CONV_OK;
}

int conv_tune_set_cache_path(const char* new_path) {
    /* Room for the temporary file's ".tmp.<pid>" too; a longer path is refused, not cut. */
    if (new_path && strlen(new_path) + 32 > PATH_BYTES)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "cache path of %zu bytes: at most %d", strlen(new_path),
                              PATH_BYTES - 32);
    pthread_mutex_lock(&table_mutex);
    snprintf(path, sizeof path, "%s", new_path ? new_path : "");
    memory.count = 0;
    memory_stamp.valid = 0;  /* read the new file on the next miss */
    pthread_mutex_unlock(&table_mutex);
    return CONV_OK;
}

int conv_tune_get_cache_path(char* out, size_t out_bytes) {
    if (!out) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "path is NULL");
    pthread_mutex_lock(&table_mutex);
    snprintf(out, out_bytes, "%s", cache_path());
    pthread_mutex_unlock(&table_mutex);
    return CONV_OK;
}

int conv_tune_clear(void) {
    int status = CONV_OK;
    pthread_mutex_lock(&table_mutex);
    memory.count = 0;
    memory_stamp.valid = 0;
    const int held = take_lock(cache_path(), F_WRLCK, FILE_LOCK_BYTE);
    if (remove(cache_path()) != 0 && errno != ENOENT)
        status = conv_set_error(CONV_ERR_INVALID_ARGUMENT, "cannot remove the tuning cache %s: %s",
                                cache_path(), strerror(errno));
    release_lock(held);
    pthread_mutex_unlock(&table_mutex);
    return status;
}
